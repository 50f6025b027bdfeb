package policyctl

// flotilla-policy's permissions, from which hack/update-codegen.sh
// generates config/rbac/policy-clusterrole.yaml and policy-role.yaml (the
// roles the Helm chart and the test world grant).
//
// Policies: read them, write the status of propagation policies.
// +kubebuilder:rbac:groups=policy.flotilla.io,resources=propagationpolicies;clusterpropagationpolicies;overridepolicies;clusteroverridepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flotilla.io,resources=propagationpolicies/status;clusterpropagationpolicies/status,verbs=update;patch
//
// Templates: read the workloads it places; make, keep equal and delete the
// copies of a Duplicated template (only copies it made: see derived.go).
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch;create;update;delete
//
// Placement reads the virtual nodes and the pods bound to them; pods
// admitted without a placement are deleted so their controllers recreate
// them through the webhook; replicas move through the Eviction API, so
// PodDisruptionBudgets hold.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// The fit gate releases the pods it holds by updating them.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// A pod no node fits is bound to a cluster that can add a node for it.
// +kubebuilder:rbac:groups="",resources=pods/binding,verbs=create
// A pod whose claim holds its data in one cluster goes there or waits for
// it: placement reads claims and the volumes they are bound to.
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch;update
// An unsupported host version is announced by an Event on the kube-system
// namespace, which stands for the host; reading it gives the Event its UID.
// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=kube-system,verbs=get
//
// Its own webhook configurations, by name only (update rights on another
// would let it redirect that webhook), to keep their caBundle current.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,resourceNames=flotilla-policy,verbs=get;update
//
// In its own namespace: the leader Lease and the webhook certificate's
// Secret, by name, and creating them.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=flotilla-system,resources=leases,resourceNames=flotilla-policy,verbs=get;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=flotilla-system,resources=leases,verbs=create
// +kubebuilder:rbac:groups="",namespace=flotilla-system,resources=secrets,resourceNames=flotilla-policy-webhook-cert,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=flotilla-system,resources=secrets,verbs=create
