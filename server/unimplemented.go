package server

import (
	"fmt"
	"strings"
)

// unimplemented lists the method families of the arbor/* protocol (DESIGN.md) that this
// version does not serve yet. They are not in the method table, so no client is offered them;
// a client that calls one anyway gets MethodNotFound saying so, rather than the generic "not
// part of the arbor protocol". A family moves from here to methods.go when it is built.
var unimplemented = map[string]string{}

// notBuilt says why method is not served, or "" when it is no planned method.
func notBuilt(method string) string {
	for prefix, what := range unimplemented {
		if strings.HasPrefix(method, prefix) {
			return fmt.Sprintf("method %q is not served by this version of Arbor; not built yet: %s", method, what)
		}
	}
	return ""
}
