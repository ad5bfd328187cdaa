package gitstate

import "strings"

const maxSlug = 24

// Slug makes a short branch-name fragment from a task: lowercase ASCII words joined by '-', cut
// at a word boundary to at most 24 characters, never empty ("task" when nothing is left).
func Slug(task string) string {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, c := range strings.ToLower(task) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			cur.WriteRune(c)
		default:
			if f, ok := fold[c]; ok {
				cur.WriteString(f)
				continue
			}
			flush()
		}
	}
	flush()
	var out strings.Builder
	for _, w := range words {
		if out.Len() == 0 {
			if len(w) > maxSlug {
				w = w[:maxSlug]
			}
			out.WriteString(w)
			continue
		}
		if out.Len()+1+len(w) > maxSlug {
			break
		}
		out.WriteByte('-')
		out.WriteString(w)
	}
	if out.Len() == 0 {
		return "task"
	}
	return out.String()
}

// fold maps common accented letters to ASCII so "Café" slugs as "cafe", not "caf".
var fold = map[rune]string{
	'à': "a", 'á': "a", 'â': "a", 'ã': "a", 'ä': "a", 'å': "a", 'æ': "ae", 'ç': "c",
	'è': "e", 'é': "e", 'ê': "e", 'ë': "e", 'ì': "i", 'í': "i", 'î': "i", 'ï': "i",
	'ñ': "n", 'ò': "o", 'ó': "o", 'ô': "o", 'õ': "o", 'ö': "o", 'ø': "o", 'ù': "u",
	'ú': "u", 'û': "u", 'ü': "u", 'ý': "y", 'ÿ': "y", 'ß': "ss",
}
