/**
 * The catalogue of the series Fleet exports: one place that names every metric, its help text,
 * labels and buckets, so instrumented modules and `docs/observability.md` agree. Names follow the
 * Kubernetes components a dashboard already knows (kube-apiserver's `apiserver_*`, client-go's
 * `workqueue_*`, kube-scheduler's `scheduler_*`, the kubelet's `kubelet_*`); what Kubernetes has
 * no name for is `fleet_*`.
 *
 * Each function asks a registry for its metrics (the same ones on every call), so a module calls
 * it once when it is built and keeps the handles.
 */
import type { Registry } from "./MetricRegistry.js"

/** Request latency buckets (seconds), a subset of kube-apiserver's. */
export const requestBuckets: ReadonlyArray<number> = [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.5, 2, 5, 10, 30, 60]
/** Store latency buckets (seconds): an fsync'd commit is around a millisecond. */
export const storeBuckets: ReadonlyArray<number> = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
/** Group-commit batch sizes (mutations per transaction). */
export const batchBuckets: ReadonlyArray<number> = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
/** Reconcile and queue-wait buckets (seconds), client-go's workqueue range. */
export const workBuckets: ReadonlyArray<number> = [0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
/** Pod start buckets (seconds), a subset of the kubelet's. */
export const podStartBuckets: ReadonlyArray<number> = [0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 20, 30, 60, 120, 300, 600]

/** The API server's series. */
export const api = (r: Registry) => ({
  requests: r.counter({
    name: "apiserver_request_total",
    help: "Counter of apiserver requests broken out for each verb, API group, resource, subresource and HTTP response code.",
    labelNames: ["verb", "group", "resource", "subresource", "code"]
  }),
  duration: r.histogram({
    name: "apiserver_request_duration_seconds",
    help: "Response latency distribution in seconds for each verb, API group, resource and subresource (watches: until the stream is established).",
    labelNames: ["verb", "group", "resource", "subresource"],
    buckets: requestBuckets
  }),
  inflight: r.gauge({
    name: "apiserver_current_inflight_requests",
    help: "Requests being handled right now, by kind (readOnly or mutating; watches are not counted).",
    labelNames: ["request_kind"]
  }),
  watchers: r.gauge({
    name: "apiserver_registered_watchers",
    help: "Open watches served from the watch cache, by API group and resource.",
    labelNames: ["group", "resource"]
  }),
  cacheObjects: r.gauge({
    name: "apiserver_watch_cache_objects",
    help: "Objects held in the watch cache, by API group and resource.",
    labelNames: ["group", "resource"]
  })
})

/** API priority and fairness (kube-apiserver's `apiserver_flowcontrol_*` names). */
export const flowControl = (r: Registry) => ({
  executing: r.gauge({
    name: "apiserver_flowcontrol_current_executing_requests",
    help: "Requests holding one of their priority level's seats (the system level has no seats and is not counted).",
    labelNames: ["priority_level"]
  }),
  inqueue: r.gauge({
    name: "apiserver_flowcontrol_current_inqueue_requests",
    help: "Requests waiting in their priority level's queues for a seat.",
    labelNames: ["priority_level"]
  }),
  rejected: r.counter({
    name: "apiserver_flowcontrol_rejected_requests_total",
    help: "Requests answered 429 by priority and fairness, by priority level and reason (queue-full, time-out).",
    labelNames: ["priority_level", "reason"]
  }),
  wait: r.histogram({
    name: "apiserver_flowcontrol_request_wait_duration_seconds",
    help: "How long requests waited in their priority level's queues, by priority level and whether they then executed.",
    labelNames: ["priority_level", "execute"],
    buckets: requestBuckets
  })
})

/** The store's series. */
export const store = (r: Registry) => ({
  duration: r.histogram({
    name: "fleet_store_operation_duration_seconds",
    help: "Latency of store operations in seconds, by operation (get, list, count, create, update, delete, txn).",
    labelNames: ["operation"],
    buckets: storeBuckets
  }),
  batchSize: r.histogram({
    name: "fleet_store_commit_batch_size",
    help: "Mutations committed by one group-commit transaction.",
    buckets: batchBuckets
  })
})

/** A controller work queue's series (client-go's names) and the reconciles it feeds. */
export const workqueue = (r: Registry) => ({
  depth: r.gauge({ name: "workqueue_depth", help: "Current depth of the work queue (keys waiting, not counting delayed ones).", labelNames: ["name"] }),
  delayed: r.gauge({ name: "fleet_workqueue_delayed", help: "Keys waiting for a requeue delay or a retry backoff to pass.", labelNames: ["name"] }),
  adds: r.counter({ name: "workqueue_adds_total", help: "Total number of adds handled by the work queue.", labelNames: ["name"] }),
  retries: r.counter({ name: "workqueue_retries_total", help: "Total number of retries (failed reconciles queued again with backoff).", labelNames: ["name"] }),
  work: r.histogram({ name: "workqueue_work_duration_seconds", help: "How long processing an item (one reconcile) takes, in seconds.", labelNames: ["name"], buckets: workBuckets }),
  errors: r.counter({ name: "controller_runtime_reconcile_errors_total", help: "Total number of reconcile errors per controller.", labelNames: ["controller"] })
})

/** The scheduler's series. */
export const scheduler = (r: Registry) => ({
  attempts: r.counter({
    name: "scheduler_schedule_attempts_total",
    help: "Number of attempts to schedule pods, by result (scheduled, unschedulable, error) and profile.",
    labelNames: ["result", "profile"]
  }),
  duration: r.histogram({
    name: "scheduler_scheduling_attempt_duration_seconds",
    help: "Scheduling attempt latency in seconds (the scheduling cycle, before binding), by result and profile.",
    labelNames: ["result", "profile"],
    buckets: workBuckets
  })
})

/** The node agent's series. */
export const agent = (r: Registry) => ({
  podStart: r.histogram({
    name: "kubelet_pod_start_duration_seconds",
    help: "Duration in seconds from the agent admitting a pod to the pod first reporting phase Running.",
    buckets: podStartBuckets
  })
})

/** Leader election's series. */
export const leader = (r: Registry) => ({
  status: r.gauge({
    name: "leader_election_master_status",
    help: "1 while this process leads the named component, 0 otherwise.",
    labelNames: ["name"]
  })
})

/** Federation status sync buckets (seconds): a debounce of 300 ms up to a missed heartbeat or two. */
export const federationBuckets: ReadonlyArray<number> = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 60]

/** Federation's series: how fresh the hub's view of each member is. */
export const federation = (r: Registry) => ({
  statusSync: r.histogram({
    name: "fleet_federation_status_sync_duration_seconds",
    help: "On a member: from a change of its nodes or pods to the hub acknowledging the status that reports it, in seconds.",
    labelNames: ["member"],
    buckets: federationBuckets
  }),
  statusAge: r.gauge({
    name: "fleet_federation_member_status_age_seconds",
    help: "On the hub: seconds since each member last reported its status (its heartbeat).",
    labelNames: ["member"]
  })
})
