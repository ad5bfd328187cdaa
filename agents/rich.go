package agents

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/arborhq/arbor/kernel"
)

// richTypes are the MIME types kept as files, with their extensions. The model sees a line
// naming each file; editors can open it.
var richTypes = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/svg+xml": ".svg",
	"text/html": ".html", "application/pdf": ".pdf", "application/json": ".json",
}

// saveRich writes the rich parts of a cell's display and result outputs to the session's
// artifacts, addressed by hash, and returns their paths and a note for the model.
func saveRich(outs []kernel.Output, dir string) (paths []string, note string, err error) {
	var lines []string
	for _, o := range outs {
		if o.Kind != "display" && o.Kind != "result" {
			continue
		}
		mimes := make([]string, 0, len(o.Data))
		for m := range o.Data {
			mimes = append(mimes, m)
		}
		sort.Strings(mimes)
		for _, m := range mimes {
			ext, ok := richTypes[m]
			if !ok {
				continue
			}
			data, derr := decodeMIME(m, o.Data[m])
			if derr != nil {
				err = derr
				continue
			}
			sum := sha256.Sum256(data)
			p := filepath.Join(dir, hex.EncodeToString(sum[:])+ext)
			if _, serr := os.Stat(p); serr != nil {
				if merr := os.MkdirAll(dir, 0o700); merr != nil {
					return paths, "", merr
				}
				if werr := writeFileAtomic(p, data); werr != nil {
					return paths, "", werr
				}
			}
			paths = append(paths, p)
			lines = append(lines, fmt.Sprintf("[%s output, %d bytes, saved as %s]", m, len(data), p))
		}
	}
	return paths, strings.Join(lines, "\n"), err
}

// decodeMIME turns a Jupyter MIME bundle value into bytes: binary types arrive base64-encoded,
// text types as a string (or a list of lines), JSON as JSON.
func decodeMIME(mime string, raw json.RawMessage) ([]byte, error) {
	if mime == "application/json" {
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var lines []string
		if err := json.Unmarshal(raw, &lines); err != nil {
			return nil, fmt.Errorf("%s output: %w", mime, err)
		}
		s = strings.Join(lines, "")
	}
	if strings.HasPrefix(mime, "image/") && mime != "image/svg+xml" || mime == "application/pdf" {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%s output is not base64: %w", mime, err)
		}
		return b, nil
	}
	return []byte(s), nil
}
