// This file holds the Set of single-object watches, and the references
// that start and stop them.

package objectwatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podcache"
)

// Key names an object, or a holder of references: its kind, namespace and
// name.
type Key struct{ Kind, Namespace, Name string }

func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Kind is one kind of object a Set watches.
type Kind struct {
	// Object is an empty object of the kind (&corev1.Secret{}).
	Object runtime.Object
	// Resource names the kind in the NotFound errors of Get.
	Resource schema.GroupResource
	// Refers, when set, names the objects that a watched object of the
	// kind holds in its turn, for as long as it is watched and exists.
	Refers func(obj runtime.Object) []Key
}

// Config is what a Set needs; all but Changed are required.
type Config struct {
	// Client lists and watches the objects; its identity needs no more
	// than get, list and watch of each object by name.
	Client kube.Interface
	// Kinds are the kinds watched, by the name Keys give them.
	Kinds map[string]Kind
	// Changed is called on a watch's goroutine when its object is added,
	// updated or deleted, and when the watch stops. created is true for an
	// object added after its watch first listed: created since.
	Changed func(key Key, created bool)
}

var (
	// ErrNotWatched is Get's error for an object no one holds.
	ErrNotWatched = errors.New("not watched")
	// ErrNotListed is Get's error for an object whose watch has not
	// listed yet (it may have just started, or be refused for now: the
	// Node authorizer learns of a pod's binding a moment after the pod
	// is bound): whether it exists is not known.
	ErrNotListed = errors.New("not listed yet")
)

// Set keeps one watch per held object. Its zero value is not usable: see
// New.
type Set struct {
	cfg Config

	mu sync.Mutex
	// ctx is Run's while it runs, nil outside it: watches held before
	// Run start with it, and none starts after.
	ctx context.Context
	wg  sync.WaitGroup
	// refs are the objects each holder holds, holders the holders of
	// each object; an object has a watch exactly while it has holders.
	refs    map[Key]map[Key]struct{}
	holders map[Key]map[Key]struct{}
	watches map[Key]*objectWatch
}

// objectWatch is the informer of one object: client-go's plain one, which
// calls its handler from its own loop. A shared informer would add a
// buffered listener and two goroutines per object, for a single handler.
type objectWatch struct {
	key   Key
	store cache.Store
	ctrl  cache.Controller
	// cancel stops the informer; nil until it runs.
	cancel context.CancelFunc
}

// New returns a Set that watches nothing until Run.
func New(cfg Config) *Set {
	if cfg.Changed == nil {
		cfg.Changed = func(Key, bool) {}
	}
	return &Set{cfg: cfg, refs: map[Key]map[Key]struct{}{}, holders: map[Key]map[Key]struct{}{}, watches: map[Key]*objectWatch{}}
}

// Hold makes refs the objects holder holds, in place of those it held: a
// watch starts for each object it is the first to hold, and stops for each
// it was the last to hold. Holding nothing forgets holder.
func (s *Set) Hold(holder Key, refs []Key) {
	s.mu.Lock()
	stopped := s.hold(holder, refs)
	s.mu.Unlock()
	s.notifyStopped(stopped)
}

// hold is Hold under s.mu; it returns the watches it stopped.
func (s *Set) hold(holder Key, refs []Key) []*objectWatch {
	old := s.refs[holder]
	if len(old) == 0 && len(refs) == 0 {
		return nil // most pods use nothing: no allocation for them
	}
	want := make(map[Key]struct{}, len(refs))
	for _, r := range refs {
		want[r] = struct{}{}
	}
	if maps.Equal(old, want) {
		return nil
	}
	if len(want) == 0 {
		delete(s.refs, holder)
	} else {
		s.refs[holder] = want
	}
	for k := range want {
		if _, ok := old[k]; !ok {
			s.addHolder(k, holder)
		}
	}
	var stopped []*objectWatch
	for k := range old {
		if _, ok := want[k]; !ok {
			if w := s.removeHolder(k, holder); w != nil {
				// What the object held goes with its watch.
				stopped = append(append(stopped, w), s.hold(k, nil)...)
			}
		}
	}
	return stopped
}

func (s *Set) addHolder(k, holder Key) {
	hs := s.holders[k]
	if hs == nil {
		hs = map[Key]struct{}{}
		s.holders[k] = hs
		w := s.newWatch(k)
		s.watches[k] = w
		s.start(w)
	}
	hs[holder] = struct{}{}
}

// removeHolder returns the watch of k, stopped, if holder was its last.
func (s *Set) removeHolder(k, holder Key) *objectWatch {
	hs := s.holders[k]
	delete(hs, holder)
	if len(hs) > 0 {
		return nil
	}
	delete(s.holders, k)
	w := s.watches[k]
	delete(s.watches, k)
	if w != nil && w.cancel != nil {
		w.cancel()
	}
	return w
}

func (s *Set) notifyStopped(ws []*objectWatch) {
	for _, w := range ws {
		s.cfg.Changed(w.key, false)
	}
}

// newWatch makes the informer of the one object k, listing and watching
// it by name in its namespace: all a node may do under the Node
// authorizer. A kind the Set was not given is a programming error.
func (s *Set) newWatch(k Key) *objectWatch {
	kind, ok := s.cfg.Kinds[k.Kind]
	if !ok {
		panic(fmt.Sprintf("objectwatch: no kind %q", k.Kind))
	}
	selector := fields.OneTermEqualSelector("metadata.name", k.Name).String()
	w := &objectWatch{key: k}
	w.store, w.ctrl = cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: kube.NewListWatch(s.cfg.Client, kind.Object, k.Namespace,
			func(o *metav1.ListOptions) { o.FieldSelector = selector }),
		ObjectType: kind.Object,
		Transform:  podcache.StripManagedFields,
		Handler: cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { s.changed(w, obj, false, !initial) },
			UpdateFunc: func(_, cur any) { s.changed(w, cur, false, false) },
			DeleteFunc: func(obj any) { s.changed(w, obj, true, false) },
		},
	})
	return w
}

// start runs w's informer under Run's context, once Run has been called
// and until it ends or w stops. Called under s.mu.
func (s *Set) start(w *objectWatch) {
	if s.ctx == nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	w.cancel = cancel
	s.wg.Go(func() { w.ctrl.RunWithContext(ctx) })
}

// changed passes an event of w's object on, after updating what the
// object holds. An event of a watch already stopped is dropped.
func (s *Set) changed(w *objectWatch, obj any, deleted, created bool) {
	m, ok := podcache.LastState(obj).(metav1.Object)
	// The apiserver sends only the named object; a fake clientset in
	// tests ignores field selectors and sends every object of the
	// namespace.
	if !ok || m.GetName() != w.key.Name {
		return
	}
	var refs []Key
	if refers := s.cfg.Kinds[w.key.Kind].Refers; refers != nil && !deleted {
		refs = refers(m.(runtime.Object))
	}
	s.mu.Lock()
	if s.watches[w.key] != w {
		s.mu.Unlock()
		return
	}
	stopped := s.hold(w.key, refs)
	s.mu.Unlock()
	s.notifyStopped(stopped)
	s.cfg.Changed(w.key, created)
}

// Get returns the watched object k. Its errors: ErrNotWatched when no one
// holds k, ErrNotListed while its watch has not listed, and the API's
// NotFound when the watch knows the object does not exist.
func (s *Set) Get(k Key) (runtime.Object, error) {
	s.mu.Lock()
	w := s.watches[k]
	s.mu.Unlock()
	switch {
	case w == nil:
		return nil, fmt.Errorf("%s: %w", k, ErrNotWatched)
	case !w.ctrl.HasSynced():
		return nil, fmt.Errorf("%s: %w", k, ErrNotListed)
	}
	obj, exists, err := w.store.GetByKey(k.Namespace + "/" + k.Name)
	switch {
	case err != nil:
		return nil, err
	case !exists:
		return nil, apierrors.NewNotFound(s.cfg.Kinds[k.Kind].Resource, k.Name)
	}
	return obj.(runtime.Object), nil
}

// Listed reports whether k is watched and its watch has listed.
func (s *Set) Listed(k Key) bool {
	s.mu.Lock()
	w := s.watches[k]
	s.mu.Unlock()
	return w != nil && w.ctrl.HasSynced()
}

// Holders returns who holds k.
func (s *Set) Holders(k Key) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Key, 0, len(s.holders[k]))
	for h := range s.holders[k] {
		out = append(out, h)
	}
	return out
}

// Watched returns the objects watched.
func (s *Set) Watched() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Key, 0, len(s.watches))
	for k := range s.watches {
		out = append(out, k)
	}
	return out
}

// Run runs the watches until ctx ends, those held already and those held
// later, and returns once they have all stopped. It is called once.
func (s *Set) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	for _, w := range s.watches {
		s.start(w)
	}
	s.mu.Unlock()
	<-ctx.Done()
	// start reads ctx under s.mu: past this point none adds to s.wg.
	s.mu.Lock()
	s.ctx = nil
	s.mu.Unlock()
	s.wg.Wait()
}
