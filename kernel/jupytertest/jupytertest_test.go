package jupytertest

import (
	"net/http"
	"testing"
)

func status(s *Server, token string) (int, error) {
	req, _ := http.NewRequest("GET", s.URL+"/api/kernelspecs", nil)
	req.Header.Set("Authorization", "token "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestServer: the server answers with its token, refuses another, goes away on Stop and comes
// back on the same address with Restart.
func TestServer(t *testing.T) {
	s := Start(t)
	if c, err := status(s, s.Token); err != nil || c != 200 {
		t.Fatalf("with the token: %d %v\n%s", c, err, s.Log())
	}
	if c, err := status(s, "wrong"); err != nil || c != 403 && c != 401 {
		t.Fatalf("with a wrong token: %d %v", c, err)
	}
	s.Stop()
	if _, err := status(s, s.Token); err == nil {
		t.Fatal("the stopped server still answers")
	}
	s.Restart()
	if c, err := status(s, s.Token); err != nil || c != 200 {
		t.Fatalf("after Restart: %d %v", c, err)
	}
}
