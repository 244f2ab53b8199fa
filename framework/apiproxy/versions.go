package apiproxy

import "sync"

// versions remembers the resourceVersion at which the proxy last saw each
// object (in an answer it read, in a watch event it handed on), to tell a
// write that changed nothing: the API server answers an update or patch
// that changes nothing with the object at the version it had.
type versions struct {
	mu sync.Mutex
	rv map[objKey]string
}

// saw notes an object at a version.
func (v *versions) saw(k objKey, rv string) {
	if rv == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rv == nil {
		v.rv = map[objKey]string{}
	}
	v.rv[k] = rv
}

// answered notes the object of an answer (readAnswer) to a request about
// one object, and says whether the request was an update or patch
// answered with the object at the version last seen: a write that
// changed nothing. An object never seen before counts as changed.
func (v *versions) answered(info Info, o *objectJSON) (noop bool) {
	if info.Name == "" || o.Metadata.ResourceVersion == "" {
		return false
	}
	k := objKey{info.Resource, info.Namespace, info.Name}
	v.mu.Lock()
	defer v.mu.Unlock()
	was := v.rv[k]
	if info.Verb == "delete" {
		delete(v.rv, k)
		return false
	}
	if v.rv == nil {
		v.rv = map[objKey]string{}
	}
	v.rv[k] = o.Metadata.ResourceVersion
	return (info.Verb == "update" || info.Verb == "patch") && was == o.Metadata.ResourceVersion
}
