package server_test

import "github.com/jobfabric/jobfabric/internal/state"

var stateFilterAll = state.JobFilter{}
