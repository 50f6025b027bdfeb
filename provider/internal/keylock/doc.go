// Package keylock holds a mutex per key that costs nothing once the key
// is unlocked.
package keylock
