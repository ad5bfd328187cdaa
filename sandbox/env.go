package sandbox

import (
	"os"
	"strings"
)

// AllowedEnv are the variables model-written code inherits from the daemon without being
// declared: what programs need to find tools, locale and terminal, and the Python and
// toolchain environment. Nothing here carries a credential by convention; proxies
// (HTTP_PROXY may hold user:password), SSH_AUTH_SOCK, cloud and CI variables are left out, so
// declare them if a project needs them.
var AllowedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM",
	"NO_COLOR", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
	"GOROOT", "GOPATH", "GOFLAGS", "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
	"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
}

// Env returns the daemon's environment filtered for model-written code: the [AllowedEnv]
// names, LC_*, and the names in declared; never a name in deny (the variables that hold model
// API keys, even when declared) nor an ARBOR_* variable (Arbor's own settings). The caller
// appends what it sets itself.
func Env(declared, deny []string) []string {
	ok := map[string]bool{}
	for _, n := range AllowedEnv {
		ok[n] = true
	}
	for _, n := range declared {
		ok[n] = true
	}
	denied := map[string]bool{}
	for _, n := range deny {
		denied[n] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if denied[name] || strings.HasPrefix(name, "ARBOR_") {
			continue
		}
		if ok[name] || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

// Filter drops from env every entry whose name is in deny.
func Filter(env, deny []string) []string {
	if len(deny) == 0 {
		return env
	}
	denied := map[string]bool{}
	for _, n := range deny {
		denied[n] = true
	}
	out := env[:0:0]
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !denied[name] {
			out = append(out, kv)
		}
	}
	return out
}
