// Package webhookcert keeps a webhook server's certificates without
// cert-manager: a self-signed CA and a serving certificate for the webhook
// Service, kept in one Secret that every replica shares, the CA bundle
// written into the webhook configurations, and both rotated before they
// expire.
//
// The schedule (see Renew) is a pure function of the Secret's contents and
// the time; Rotator is the I/O around it.
package webhookcert
