// Package etcdsnapshot saves a snapshot from an etcd member and verifies a
// snapshot file with etcd's own code (etcdctl snapshot save, etcdutl snapshot
// status), for the backup Job. It is apart from package backup so that the
// manager, which reads backup reports, does not link etcd's storage code.
package etcdsnapshot

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	utlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/gauntlet-dev/gauntlet/operator/internal/backup"
)

// Saver returns a backup.Options.Save that streams a snapshot from the
// first of endpoints that answers within dialTimeout. (etcd's client waits
// for a connection as long as its context allows; a member that does not
// answer must cost the dial timeout, not the whole backup's.)
func Saver(endpoints []string, dialTimeout time.Duration, lg *zap.Logger) func(ctx context.Context, path string) error {
	return func(ctx context.Context, path string) error {
		var errs []error
		for _, ep := range endpoints {
			// A snapshot comes from one member: try them in turn.
			cfg := clientv3.Config{Endpoints: []string{ep}, DialTimeout: dialTimeout, Logger: lg}
			if err := answers(ctx, cfg, ep); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", ep, err))
				continue
			}
			if _, err := clientsnapshot.SaveWithVersion(ctx, lg, cfg, path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", ep, err))
				continue
			}
			return nil
		}
		return fmt.Errorf("no endpoint gave a snapshot: %v", errs)
	}
}

// answers asks the member for its status within the dial timeout.
func answers(ctx context.Context, cfg clientv3.Config, ep string) error {
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	_, err = cli.Status(ctx, ep)
	return err
}

// Verify checks the file's integrity (bbolt's consistency check and the
// appended hash) and reads its revision, hash and key count, as
// `etcdutl snapshot status` does.
func Verify(lg *zap.Logger) func(path string) (backup.Status, error) {
	return func(path string) (backup.Status, error) {
		st, err := utlsnapshot.NewV3(lg).Status(path)
		if err != nil {
			return backup.Status{}, err
		}
		return backup.Status{Hash: st.Hash, Revision: st.Revision, TotalKey: st.TotalKey, TotalSize: st.TotalSize}, nil
	}
}
