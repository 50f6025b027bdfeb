// Package keyqueue is flotilla-node's one worker loop over rate-limited
// queues of object keys: a key whose work fails is tried again with
// backoff, its failures logged as information until they last, and a loop
// over informer caches starts only once they are complete.
package keyqueue
