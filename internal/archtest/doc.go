// Package archtest holds no code: its tests keep the architecture true —
// pure cores import no I/O, and every package says what it owns.
package archtest
