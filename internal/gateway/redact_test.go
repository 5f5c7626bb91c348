package gateway

import (
	"strings"
	"testing"
)

// TestBackendURLSecretsStayOutOfErrors checks that a backend URL refused for carrying
// credentials, or malformed around them, is named in the error without them.
func TestBackendURLSecretsStayOutOfErrors(t *testing.T) {
	for _, raw := range []string{
		"http://user:s3cret@10.0.0.1:8000",
		"a=http://user:s3cret@10.0.0.1:8000",
		"http://s3cret@10.0.0.1:8000",
		"http://user:s3cret@10.0.0.1:port",
		"http://user:s3 cret@10.0.0.1",
		"ftp://user:s3cret@10.0.0.1",
		"http://10.0.0.1:8000/?token=s3cret",
		"http://10.0.0.1:8000/v1#s3cret",
	} {
		t.Run(raw, func(t *testing.T) {
			c := DefaultConfig()
			c.Backends = []string{raw}
			err := c.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "s3") || !strings.Contains(err.Error(), "backends[0]") {
				t.Errorf("error %q: want backends[0] named without its secret", err)
			}
		})
	}
}
