// Command gen writes the editors' mirrors of the arbor/* protocol and the event payloads from
// their one source in Go: extensions/vscode/src/protocol.gen.ts (TypeScript types and
// constants) and extensions/nvim/lua/arbor/protocol_gen.lua (Lua constants and LuaLS
// annotations). Run it with `go generate ./server`; TestMirrorsCurrent fails when a
// generated file is stale.
//
// Types come from the method table (server.ProtocolMethods, server.ProtocolNotifications)
// and the event registry (event.Registered) by reflection; constants (Method*, Notify*,
// State*, Code*, Cmd*) from the server package's source, so each is named once, in Go.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "..", "the repository root")
	flag.Parse()
	files, err := generate(filepath.Join(*root, "server"))
	if err != nil {
		log.Fatal(err)
	}
	for rel, data := range files {
		if err := os.WriteFile(filepath.Join(*root, rel), data, 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote", rel)
	}
}

// Generated files, relative to the repository root.
const (
	tsFile  = "extensions/vscode/src/protocol.gen.ts"
	luaFile = "extensions/nvim/lua/arbor/protocol_gen.lua"
)

// generate returns the contents of every generated file.
func generate(serverDir string) (map[string][]byte, error) {
	consts, err := readConsts(serverDir)
	if err != nil {
		return nil, err
	}
	m := collect()
	return map[string][]byte{
		tsFile:  writeTS(m, consts),
		luaFile: writeLua(m, consts),
	}, nil
}
