// Package fileutil holds small file helpers shared by the server and the
// CLI: today, writing a file so that readers never see it half-written.
package fileutil
