package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/arborhq/arbor/server"
	"github.com/arborhq/arbor/workspace"
	"golang.org/x/sys/unix"
)

// cmdTrust shows the settings of a repository's arbor.json that run commands or choose where
// the session's data and keys go, and trusts exactly those values once the user says so. It
// asks the daemon, which judges them with its own environment (ARBOR_MODEL_BASE_URL decides
// whose URL a model entry has, ARBOR_API_KEY_ENV whether it gets a key) and shares the trust
// store with this command.
func cmdTrust(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trust", flag.ContinueOnError)
	yes := fs.Bool("yes", false, "trust without asking (for scripts; review the listed settings first)")
	list := fs.Bool("list", false, "list the trusted repositories and the settings trusted")
	revoke := fs.Bool("revoke", false, "stop trusting the repository")
	pos, err := flags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 || *list && (*revoke || *yes || len(pos) > 0) {
		return fmt.Errorf("usage: arbor trust [DIR] [--yes] | --list | --revoke [DIR]")
	}
	if *list {
		return listTrust(os.Stdout)
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	abs, err := absDir(dir)
	if err != nil {
		return err
	}
	c, err := connect(ctx, true, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if *revoke {
		st, err := server.TrustRevoke.Call(ctx, c, server.TrustParams{Dir: abs})
		if err != nil {
			return err
		}
		fmt.Printf("%s is not trusted: sessions there refuse to start while its arbor.json sets any of the settings trust guards (for a profile's, only runs with that profile)\n", st.Repo)
		return nil
	}
	st, err := server.TrustGet.Call(ctx, c, server.TrustParams{Dir: abs})
	if err != nil {
		return err
	}
	if len(st.Settings) == 0 {
		fmt.Printf("%s sets nothing that needs trust (no commands, interpreter, sandbox, endpoints or keys): sessions start there as they are\n", st.File)
		return nil
	}
	printTrust(os.Stdout, st)
	if st.Trusted {
		fmt.Printf("already trusted with exactly these values\n")
		return nil
	}
	if !*yes {
		ok, err := confirm(os.Stdin, os.Stdout, fmt.Sprintf("Trust these settings for %s? [y/N] ", st.Repo))
		if err != nil {
			return err
		}
		if !ok {
			fmt.Println("not trusted")
			return exitCode(1)
		}
	}
	// The hash of what was shown: if the file changed meanwhile, the daemon refuses.
	st, err = server.TrustGrant.Call(ctx, c, server.TrustGrantParams{Dir: abs, Hash: st.Hash})
	if err != nil {
		return err
	}
	fmt.Printf("trusted %s; a change to any of these settings asks again (arbor trust --revoke undoes this)\n", st.Repo)
	return nil
}

func printTrust(w io.Writer, st *server.TrustState) {
	how := "sets"
	if st.Changed {
		how = "changed since you trusted it; it now sets"
	}
	fmt.Fprintf(w, "%s %s settings that run commands or can send your code, conversation or keys elsewhere:\n", st.File, how)
	for _, s := range st.Settings {
		fmt.Fprintf(w, "  %s = %s\n      %s\n", s.Name, s.Value, s.Why)
	}
}

// confirm asks on a terminal; anything else must say --yes, so a pipe cannot answer for
// the user.
func confirm(in *os.File, out io.Writer, prompt string) (bool, error) {
	// A terminal answers the terminal ioctl; /dev/null is a character device too, but no one
	// types there.
	if _, err := unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS); err != nil {
		return false, fmt.Errorf("standard input is not a terminal, so nobody can confirm: review the settings above and run again with --yes to trust them")
	}
	fmt.Fprint(out, prompt)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

func listTrust(w io.Writer) error {
	recs, err := workspace.TrustedRepos()
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(w, "no trusted repositories (%s)\n", workspace.TrustPath())
		return nil
	}
	for _, r := range recs {
		fmt.Fprintf(w, "%s  (trusted %s)\n", r.Repo, r.Granted.Local().Format("2006-01-02 15:04"))
		for _, s := range r.Settings {
			fmt.Fprintf(w, "  %s = %s\n", s.Name, s.Value)
		}
	}
	return nil
}
