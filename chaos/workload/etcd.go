package workload

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdKV is KV over etcd's v3 client: Put and a linearizable Get.
type EtcdKV struct {
	Client *clientv3.Client
	// RequireLeader makes a member without a leader (cut off from the
	// majority) refuse at once instead of holding the request until the
	// operation times out.
	RequireLeader bool
}

func (e EtcdKV) ctx(ctx context.Context) context.Context {
	if e.RequireLeader {
		return clientv3.WithRequireLeader(ctx)
	}
	return ctx
}

// Put implements KV.
func (e EtcdKV) Put(ctx context.Context, key, value string) (int64, error) {
	resp, err := e.Client.Put(e.ctx(ctx), key, value)
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Get implements KV.
func (e EtcdKV) Get(ctx context.Context, key string) (string, bool, error) {
	resp, err := e.Client.Get(e.ctx(ctx), key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}

// GetAt implements KV.
func (e EtcdKV) GetAt(ctx context.Context, key string, revision int64) (string, int64, bool, error) {
	resp, err := e.Client.Get(e.ctx(ctx), key, clientv3.WithRev(revision))
	if err != nil || len(resp.Kvs) == 0 {
		return "", 0, false, err
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, true, nil
}
