// This file holds the per-key locks.

package keylock

import "sync"

// Map is a mutex per key that holds an entry only while the key is
// locked or waited for, so that a key used once (a namespace created, then
// deleted) costs nothing afterwards. The zero value is ready to use.
type Map struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	sync.Mutex
	users int // holders and waiters
}

// Lock locks key and returns its unlock.
func (k *Map) Lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*entry{}
	}
	l, ok := k.locks[key]
	if !ok {
		l = &entry{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()

	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// Len is how many keys hold an entry.
func (k *Map) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
