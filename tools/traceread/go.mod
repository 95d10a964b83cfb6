module github.com/jobfabric/jobfabric/tools/traceread

go 1.26.8

require golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4 // indirect
