package domain

// MaxNameLen bounds every user-chosen name: it must fit a DNS label, a Linux
// netns name and a NOS VRF name.
const MaxNameLen = 63

// ValidateName checks a user-chosen name (tenant, workspace, server, switch,
// job): 1-63 characters, lower-case letters, digits and '-', starting and ending
// with a letter or digit. field names the field for the error.
func ValidateName(field, name string) *Error {
	if name == "" {
		return Invalid(field, "%s must not be empty", field)
	}
	if len(name) > MaxNameLen {
		return Invalid(field, "%s %q is %d characters long; the limit is %d", field, truncate(name, 80), len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i > 0 && i < len(name)-1)
		if !ok {
			return Invalid(field, "%s %q must be lower-case letters, digits and '-' (not at either end)", field, truncate(name, 80))
		}
	}
	return nil
}

// ValidateRange checks lo <= v <= hi for a numeric field.
func ValidateRange(field string, v, lo, hi int64) *Error {
	if v < lo || v > hi {
		return Invalid(field, "%s is %d; it must be between %d and %d", field, v, lo, hi)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Ref formats a two-level reference such as "acme/research". A
// concatenation, not fmt: apply makes one or two per submit (issue 18),
// and one only looked up needs no allocation.
func Ref(parent, child string) string { return parent + "/" + child }
