// Command floor is the baseline the bench reads flotilla-node's idle memory
// against: the least a process that forwards pods between clusters runs,
// client-go's clientset and a pod informer on each cluster, and nothing
// else. The bench builds it as flotilla-node is built, runs it beside
// flotilla-node on the same clusters and reads its RSS at the end of the
// same idle window. It prints "synced" once every informer has synced and
// runs until it is interrupted.
//
//	floor --kubeconfig host.kubeconfig,member.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfigs := flag.String("kubeconfig", "", "comma-separated kubeconfigs, one per cluster whose pods are watched")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, strings.Split(*kubeconfigs, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfigs []string) error {
	var synced []cache.InformerSynced
	for _, path := range kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return err
		}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		f := informers.NewSharedInformerFactory(c, 0)
		synced = append(synced, f.Core().V1().Pods().Informer().HasSynced)
		f.Start(ctx.Done())
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		return fmt.Errorf("informers not synced within a minute")
	}
	fmt.Println("synced")
	<-ctx.Done()
	return nil
}
