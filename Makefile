# The two entry points; see README.md.
.PHONY: demo test

# Starts a host and three member clusters with flotilla and a sample
# Deployment spread across them; runs until Ctrl-C.
demo:
	go run ./hack/demo

# Unit and end-to-end tests against real clusters (builds the test world's
# binaries into ~/.cache/flotilla on first use).
test:
	bash hack/test.sh
