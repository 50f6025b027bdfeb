// The name a Konnectivity agent's certificate carries to be allowed the
// default route (cmd/flotilla-konnectivity-gate).

package wellknown

// KonnectivityDefaultRouteURI, as a URI SAN of a Konnectivity agent's
// client certificate, lets that agent claim `default-route=true` through
// flotilla-konnectivity-gate: the agent then receives the traffic for every
// address no other agent claims. A URN, not a DNS name or an address, so that
// no certificate issued for a host names it by accident.
const KonnectivityDefaultRouteURI = "urn:flotilla:konnectivity:default-route"
