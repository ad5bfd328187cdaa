//go:build !linux

package kernel

import "net/http"

// wsHTTP is the client kernel WebSockets are dialed with (see quickack_linux.go).
var wsHTTP = http.DefaultClient
