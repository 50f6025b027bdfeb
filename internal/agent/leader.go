package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderConfig says which Lease an active/standby pair of flotilla-nodes
// for one member contend for.
type LeaderConfig struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Identity tells the candidates apart (host name and a random part).
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal
	// before it takes over.
	LeaseDuration time.Duration
}

// errLostLease ends a process that stopped being the active one, so that
// it never works beside the new leader; its Deployment restarts it as a
// standby.
var errLostLease = errors.New("lost the leader Lease")

// RunAsLeader waits until this process holds the Lease, then runs fn until
// ctx ends or the Lease is lost. A standby taking over adopts the member
// pods of its predecessor by their identity labels (as after a restart),
// so a takeover moves no pod.
func RunAsLeader(ctx context.Context, cfg LeaderConfig, fn func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	// Set when fn starts; if ctx ends in the instant between acquiring the
	// Lease and that, fn may still start and returns at once on its
	// cancelled context.
	var started atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.LeaseDuration * 2 / 3,
		RetryPeriod:     cfg.LeaseDuration / 5,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				started.Store(true)
				log.G(ctx).WithField("lease", cfg.Namespace+"/"+cfg.Name).Info("active: holding the leader Lease")
				done <- fn(ctx)
				cancel()
			},
			OnStoppedLeading: func() { cancel() },
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.G(ctx).WithField("leader", id).Info("standby: another flotilla-node is active")
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(runCtx)
	if !started.Load() {
		return ctx.Err()
	}
	err = <-done
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	}
	return errLostLease
}
