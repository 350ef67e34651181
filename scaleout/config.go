package scaleout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"rig/internal/metrics"
)

// Config names the Temporal cluster and the spool. On a single host and in
// tests the cluster is the Temporal CLI's dev server (StartDevServer); in
// production it is an existing cluster, which rig never starts.
type Config struct {
	// Address is the cluster's frontend, host:port.
	Address string `json:"address"`
	// Namespace is the Temporal namespace; "default" when empty.
	Namespace string `json:"namespace,omitempty"`
	// APIKeyFile holds an API key sent with every call (Temporal Cloud or a
	// cluster with API-key auth); it implies TLS.
	APIKeyFile string `json:"api_key_file,omitempty"`
	// TLS turns on TLS; CAFile, CertFile and KeyFile give a private CA and a
	// client certificate (mTLS). ServerName overrides the name checked.
	TLS        bool   `json:"tls,omitempty"`
	CAFile     string `json:"ca_file,omitempty"`
	CertFile   string `json:"cert_file,omitempty"`
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
	// Spool is the folder the workers and the coordinator share.
	Spool string `json:"spool"`
	// Metrics, when set, gets the activities this client's workers run:
	// trial attempts on a worker, merges on the coordinator (metrics.go).
	Metrics *metrics.Set `json:"-"`
}

func (c Config) namespace() string {
	if c.Namespace == "" {
		return "default"
	}
	return c.Namespace
}

// Check says what is missing from a config before anything dials.
func (c Config) Check() error {
	var missing []string
	if c.Address == "" {
		missing = append(missing, "address (the Temporal frontend, host:port; --temporal)")
	}
	if c.Spool == "" {
		missing = append(missing, "spool (the folder the workers and the coordinator share; --spool)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("scale-out config: missing %s", strings.Join(missing, " and "))
	}
	return nil
}

// Dial connects to the cluster and checks the namespace. An unreachable
// server, a wrong namespace and refused credentials each get an error that
// names the address and what to fix; nothing is submitted.
func (c Config) Dial(ctx context.Context, identity string, log *slog.Logger) (client.Client, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	opts := client.Options{HostPort: c.Address, Namespace: c.namespace(), Identity: identity,
		// The SDK's own chatter stays at warnings.
		Logger: tlog.NewStructuredLogger(slog.New(levelFilter{log.Handler(), slog.LevelWarn}))}
	if onLoopback(c.Address) {
		// The SDK gzips every request by default, and the server answers
		// in kind: on loopback the bytes are free and the CPU is not (a
		// fleet on one host spent a tenth of its time compressing).
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if c.Metrics != nil {
		opts.Interceptors = []interceptor.ClientInterceptor{&activityMetrics{m: c.Metrics}}
	}
	if c.TLS || c.APIKeyFile != "" || c.CAFile != "" || c.CertFile != "" {
		tc := &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("scale-out config ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("scale-out config ca_file %s: no PEM certificate in it", c.CAFile)
			}
			tc.RootCAs = pool
		}
		if c.CertFile != "" || c.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("scale-out config cert_file/key_file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts.ConnectionOptions.TLS = tc
	}
	if c.APIKeyFile != "" {
		key, err := os.ReadFile(c.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("scale-out config api_key_file: %w", err)
		}
		opts.Credentials = client.NewAPIKeyStaticCredentials(strings.TrimSpace(string(key)))
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, c.explain(err)
	}
	if _, err := cl.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.namespace()}); err != nil {
		cl.Close()
		return nil, c.explain(err)
	}
	return cl, nil
}

// onLoopback says whether a host:port names this machine's loopback.
func onLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (c Config) explain(err error) error {
	var nf *serviceerror.NamespaceNotFound
	var denied *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("temporal at %s has no namespace %q (create it with: temporal operator namespace create %s, or name another with --namespace): %w", c.Address, c.namespace(), c.namespace(), err)
	case errors.As(err, &denied), status.Code(err) == codes.Unauthenticated:
		return fmt.Errorf("temporal at %s refused rig's credentials for namespace %q (check api_key_file or the client certificate): %w", c.Address, c.namespace(), err)
	default:
		return fmt.Errorf("temporal at %s is unreachable (is the server running? single host: rig engine dev): %w", c.Address, err)
	}
}

// levelFilter drops records below min.
type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (l levelFilter) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= l.min && l.Handler.Enabled(ctx, lv)
}
