// Package objectwatch watches single host objects, one watch per object,
// for as long as something holds a reference to it: the way a kubelet
// reads the Secrets and ConfigMaps of its pods (the kubelet's watch-based
// manager), and the only way the Node authorizer lets a node read them.
// It lists and watches each object with a metadata.name field selector in
// its namespace, never a whole kind, and keeps only the objects in use,
// whole.
//
// Holders (pods, or watched objects that refer to others, such as a
// ServiceAccount's image pull secrets) declare what they reference with
// Hold; a watch starts with an object's first holder and stops with its
// last. Until a watch has listed once, its object is unknown (ErrNotListed),
// which is not the same as absent (NotFound).
package objectwatch
