package dshq

// AbsoluteCwd reports whether cwd is an absolute path a session header may
// hold as its workspace: a POSIX path ("/home/u/proj"), a Windows
// drive-letter path ("e:\Workspace\src", "C:/work") or a Windows UNC path
// ("\\server\share\proj"). A workspace is the string its harness wrote,
// compared byte for byte: no case folding, no separator or trailing-slash
// normalisation, so "e:\x", "E:\x" and "e:/x" are three workspaces
// (docs/harnesses.md#headers).
func AbsoluteCwd(cwd string) bool {
	switch {
	case len(cwd) > 0 && cwd[0] == '/':
		return true
	case len(cwd) >= 3 && isASCIILetter(cwd[0]) && cwd[1] == ':' && (cwd[2] == '\\' || cwd[2] == '/'):
		return true
	case len(cwd) >= 5 && cwd[0] == '\\' && cwd[1] == '\\':
		// \\server\share: a server and a share, both named.
		rest := cwd[2:]
		i := indexByte(rest, '\\')
		return i > 0 && i+1 < len(rest) && rest[i+1] != '\\'
	}
	return false
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
