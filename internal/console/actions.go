package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jobfabric/jobfabric/internal/api"
	"github.com/jobfabric/jobfabric/internal/domain"
)

// jobID reads a job ID from the path: digits only, so nothing else reaches
// the API's path.
func jobID(r *http.Request) (uint64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil || id == 0 {
		return 0, domain.Errorf(domain.CodeNotFound, "job %q not found", v)
	}
	return id, nil
}

// specOf reads the submit form. Fields are named as the API's (gpus,
// gpusPerNode, migProfile...), so the API's errors name the form's fields.
func specOf(f url.Values) (domain.JobSpec, error) {
	var s domain.JobSpec
	if ref := strings.TrimSpace(f.Get("workspace")); ref != "" {
		t, w, ok := strings.Cut(ref, "/")
		if !ok {
			return s, domain.Invalid("workspace", "workspace %q must be TENANT/WORKSPACE", ref)
		}
		s.Tenant, s.Workspace = t, w
	}
	s.Name = strings.TrimSpace(f.Get("name"))
	s.MIGProfile = strings.TrimSpace(f.Get("migProfile"))
	s.GPUModel = strings.TrimSpace(f.Get("gpuModel"))
	s.Preemptible = f.Get("preemptible") != ""
	ints := []struct {
		field string
		to    *int
	}{{"gpus", &s.GPUs}, {"gpusPerNode", &s.GPUsPerNode}, {"migCount", &s.MIGCount}, {"priority", &s.Priority}}
	for _, i := range ints {
		v := strings.TrimSpace(f.Get(i.field))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return s, domain.Invalid(i.field, "%s %q is not a whole number", i.field, v)
		}
		*i.to = n
	}
	if v := strings.TrimSpace(f.Get("timeLimitSeconds")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, domain.Invalid("timeLimitSeconds", "timeLimitSeconds %q is not a whole number", v)
		}
		s.TimeLimitSeconds = n
	}
	if v := strings.TrimSpace(f.Get("share")); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s, domain.Invalid("share", "share %q is not a number", v)
		}
		s.Share = x
	}
	return s, nil
}

func (c *Console) submit(r *http.Request, q *request) (string, string, error) {
	spec, err := specOf(r.PostForm)
	if err != nil {
		return "", "", err
	}
	var j domain.Job
	if err := q.api.do(r.Context(), http.MethodPost, "/v1/jobs", spec, &j); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("submitted job %d (%s)", j.ID, j.State), fmt.Sprintf("%sjobs/%d", Prefix, j.ID), nil
}

func (c *Console) cancel(r *http.Request, q *request) (string, string, error) {
	id, err := jobID(r)
	if err != nil {
		return "", "", err
	}
	var j domain.Job
	if err := q.api.do(r.Context(), http.MethodPost, fmt.Sprintf("/v1/jobs/%d/cancel", id), nil, &j); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("job %d is %s", j.ID, j.State), fmt.Sprintf("%sjobs/%d", Prefix, j.ID), nil
}

// drain drains a server (draining=true) or ends the drain (false).
func (c *Console) drain(r *http.Request, q *request) (string, string, error) {
	name := strings.TrimSpace(r.PostForm.Get("server"))
	if err := domain.ValidateName("server", name); err != nil {
		return "", "", err
	}
	on := r.PostForm.Get("draining") != "false"
	req := api.NodeUpdateRequest{Draining: &on, Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	if req.Reason == "" && on {
		req.Reason = "drained from the console"
	}
	var cond domain.NodeCondition
	if err := q.api.do(r.Context(), http.MethodPatch, "/v1/nodes/"+url.PathEscape(name), req, &cond); err != nil {
		return "", "", err
	}
	msg := name + " is draining: its jobs stop after the preemption grace"
	if !on {
		msg = name + " is no longer draining"
	}
	return msg, r.PostForm.Get("back"), nil
}
