package main

import "context"

func runOrder(ctx context.Context, e *env) (string, bool)   { return "not yet", false }
func runSaga(ctx context.Context, e *env) (string, bool)    { return "not yet", false }
func runVet(ctx context.Context, e *env) (string, bool)     { return "not yet", false }
