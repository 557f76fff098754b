package idempotency_test

const workerEnv = "IDEMPOTENCY_TEST_WORKER"

func runWorker() int { return 0 }
