import { describe, expect, it } from "vitest"
import * as Hpa from "../../src/controllers/HorizontalPodAutoscaler.js"
import * as Autoscaling from "../../src/model/Autoscaling.js"

type Json = Record<string, any>

const T0 = Date.parse("2024-05-01T10:00:00Z")
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
const settings = Hpa.defaultSettings

/** A HorizontalPodAutoscaler as the API stores it (defaulted), for a Deployment `web`, cpu at 50%. */
const hpa = (spec: Json = {}, status: Json = {}): Json =>
  Autoscaling.defaults({
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: { name: "web", namespace: "default", uid: "hpa-uid", generation: 1 },
  spec: {
    scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" },
    minReplicas: 1,
    maxReplicas: 10,
    metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }],
    ...spec
  },
  status
  })

interface PodOptions {
  readonly cpu?: string | null
  readonly memory?: string
  readonly phase?: string
  readonly ready?: boolean
  /** When the pod started and became (un)ready, ms before T0 (default 10 min). */
  readonly age?: number
  readonly deleting?: boolean
}

const pod = (name: string, o: PodOptions = {}): Json => {
  const started = T0 - (o.age ?? 600_000)
  const requests: Json = {}
  if (o.cpu !== null) requests["cpu"] = o.cpu ?? "100m"
  if (o.memory !== undefined) requests["memory"] = o.memory
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app: "web" }, ...(o.deleting ? { deletionTimestamp: iso(T0) } : {}) },
    spec: { containers: [{ name: "app", image: "i", resources: { requests } }] },
    status: {
      phase: o.phase ?? "Running",
      ...(o.phase === "Pending" ? {} : { startTime: iso(started), conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True", lastTransitionTime: iso(started) }] })
    }
  }
}

const sample = (name: string, usage: Json, timestampMs = T0 - 5_000): Json => ({
  apiVersion: "metrics.k8s.io/v1beta1",
  kind: "PodMetrics",
  metadata: { name, namespace: "default" },
  timestamp: iso(timestampMs),
  window: "15s",
  containers: [{ name: "app", usage }]
})

const scale = (replicas: number): Hpa.Scale => ({ specReplicas: replicas, statusReplicas: replicas, selector: { matchLabels: { app: "web" } } })

/** `n` running pods named p0…, with the same request, each using `cpu` (and `memory`). */
const fleet = (n: number, cpu: string, memory?: string) => ({
  pods: Array.from({ length: n }, (_, i) => pod(`p${i}`, memory === undefined ? {} : { memory: "100Mi" })),
  podMetrics: Array.from({ length: n }, (_, i) => sample(`p${i}`, memory === undefined ? { cpu } : { cpu, memory }))
})

const condition = (status: Json, type: string) => (status["conditions"] as Array<Json>).find((c) => c["type"] === type)
const brief = (status: Json, type: string) => {
  const c = condition(status, type)
  return c === undefined ? undefined : `${c["status"]}/${c["reason"]}`
}

/** One sync, as the reconciler runs it, with the scale write succeeding. */
const sync = (o: Partial<Hpa.Observed> & { readonly hpa: Json }, nowMs = T0, write: Hpa.WriteOutcome = { _tag: "Written" }) => {
  const observed: Hpa.Observed = { scale: scale(2), pods: [], podMetrics: [], history: undefined, ...o }
  const decision = Hpa.decide(observed, settings, nowMs)
  const settled = Hpa.settle(o.hpa, decision, decision.rescale === undefined ? undefined : write, nowMs)
  return { decision, ...settled, status: settled.status ?? (o.hpa["status"] as Json) }
}

describe("HorizontalPodAutoscaler.decide (one sync)", () => {
  interface Case {
    readonly name: string
    readonly hpa?: Json
    readonly current: number
    readonly pods: ReadonlyArray<Json>
    readonly podMetrics: ReadonlyArray<Json> | { readonly error: string }
    /** The size written, or undefined for no rescale. */
    readonly rescale: number | undefined
    /** `status.desiredReplicas` after the sync. */
    readonly desired: number
    readonly reason?: string
    readonly conditions: Readonly<Record<string, string>>
    readonly utilization?: number
  }
  const cases: ReadonlyArray<Case> = [
    {
      name: "usage 4× the target: ceil(2 × 4) = 8, but at most ×2 (at least 4) per sync",
      current: 2,
      ...fleet(2, "200m"),
      rescale: 4,
      desired: 4,
      reason: "cpu resource utilization (percentage of request) above target",
      conditions: { AbleToScale: "True/SucceededRescale", ScalingActive: "True/ValidMetricFound", ScalingLimited: "True/ScaleUpLimit" },
      utilization: 200
    },
    {
      name: "usage 1.5× the target with room: ceil(4 × 1.5) = 6",
      current: 4,
      ...fleet(4, "75m"),
      rescale: 6,
      desired: 6,
      reason: "cpu resource utilization (percentage of request) above target",
      conditions: { AbleToScale: "True/SucceededRescale", ScalingLimited: "False/DesiredWithinRange" },
      utilization: 75
    },
    {
      name: "within the 10% tolerance: no change",
      current: 4,
      ...fleet(4, "54m"),
      rescale: undefined,
      desired: 4,
      conditions: { AbleToScale: "True/ReadyForNewScale", ScalingActive: "True/ValidMetricFound", ScalingLimited: "False/DesiredWithinRange" },
      utilization: 54
    },
    {
      name: "capped at maxReplicas",
      hpa: hpa({ maxReplicas: 5 }),
      current: 4,
      ...fleet(4, "100m"),
      rescale: 5,
      desired: 5,
      conditions: { ScalingLimited: "True/TooManyReplicas" }
    },
    {
      name: "a scale-down waits for the stabilization window (the first sync remembers the current size)",
      current: 4,
      ...fleet(4, "10m"),
      rescale: undefined,
      desired: 4,
      conditions: { AbleToScale: "True/ScaleDownStabilized", ScalingLimited: "False/DesiredWithinRange" }
    },
    {
      name: "current above maxReplicas: back to max without looking at metrics",
      hpa: hpa({ maxReplicas: 3 }),
      current: 5,
      pods: [],
      podMetrics: [],
      rescale: 3,
      desired: 3,
      reason: "Current number of replicas above Spec.MaxReplicas",
      conditions: { AbleToScale: "True/SucceededRescale" }
    },
    {
      name: "current below minReplicas: up to min",
      hpa: hpa({ minReplicas: 3 }),
      current: 1,
      pods: [],
      podMetrics: [],
      rescale: 3,
      desired: 3,
      reason: "Current number of replicas below Spec.MinReplicas",
      conditions: { AbleToScale: "True/SucceededRescale" }
    },
    {
      name: "a target scaled to zero is left alone",
      current: 0,
      pods: [],
      podMetrics: [],
      rescale: undefined,
      desired: 0,
      conditions: { AbleToScale: "True/SucceededGetScale", ScalingActive: "False/ScalingDisabled" }
    },
    {
      name: "unready pods count as using nothing on a scale-up",
      current: 4,
      pods: [pod("p0"), pod("p1"), pod("p2", { ready: false, age: 10_000 }), pod("p3", { phase: "Pending" })],
      podMetrics: [sample("p0", { cpu: "100m" }), sample("p1", { cpu: "100m" }), sample("p2", { cpu: "100m" })],
      // The ready two use 100% of requests (ratio 2); with the unready two at 0: 200/400 = 50% → ratio 1: no change.
      rescale: undefined,
      desired: 4,
      conditions: { AbleToScale: "True/ReadyForNewScale" }
    },
    {
      name: "a pod without a sample counts as using its request on a scale-down",
      hpa: hpa({ behavior: { scaleDown: { stabilizationWindowSeconds: 0 } } }),
      current: 3,
      pods: [pod("p0"), pod("p1"), pod("p2")],
      podMetrics: [sample("p0", { cpu: "10m" }), sample("p1", { cpu: "10m" })],
      // (10+10+100)/300 = 40% → ratio 0.8 → ceil(0.8 × 3) = 3: no change (without the fallback it would be 1).
      rescale: undefined,
      desired: 3,
      conditions: { AbleToScale: "True/ReadyForNewScale" }
    },
    {
      name: "pods being deleted or failed are ignored",
      current: 2,
      pods: [pod("p0"), pod("p1"), pod("gone", { deleting: true }), pod("bad", { phase: "Failed" })],
      podMetrics: [sample("p0", { cpu: "100m" }), sample("p1", { cpu: "100m" }), sample("gone", { cpu: "900m" })],
      rescale: 4,
      desired: 4,
      conditions: { ScalingLimited: "False/DesiredWithinRange" },
      utilization: 100
    },
    {
      name: "an average value target: 300Mi per pod for 200Mi wanted → ceil(2 × 1.5) = 3",
      hpa: hpa({ metrics: [{ type: "Resource", resource: { name: "memory", target: { type: "AverageValue", averageValue: "200Mi" } } }] }),
      current: 2,
      ...fleet(2, "1m", "300Mi"),
      rescale: 3,
      desired: 3,
      reason: "memory resource above target",
      conditions: { ScalingActive: "True/ValidMetricFound" }
    },
    {
      name: "the largest proposal of several metrics wins",
      hpa: hpa({
        metrics: [
          { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } },
          { type: "Resource", resource: { name: "memory", target: { type: "Utilization", averageUtilization: 50 } } }
        ]
      }),
      current: 2,
      ...fleet(2, "50m", "150Mi"),
      rescale: 4,
      desired: 4,
      reason: "memory resource utilization (percentage of request) above target",
      conditions: { ScalingActive: "True/ValidMetricFound" }
    },
    {
      name: "no metrics at all: the API answers none",
      current: 2,
      pods: [pod("p0"), pod("p1")],
      podMetrics: [],
      rescale: undefined,
      desired: 0,
      conditions: { AbleToScale: "True/SucceededGetScale", ScalingActive: "False/FailedGetResourceMetric" }
    },
    {
      name: "the metrics API fails",
      current: 2,
      pods: [pod("p0"), pod("p1")],
      podMetrics: { error: "the server could not find the requested resource" },
      rescale: undefined,
      desired: 0,
      conditions: { ScalingActive: "False/FailedGetResourceMetric" }
    },
    {
      name: "a container without a cpu request",
      current: 2,
      pods: [pod("p0", { cpu: null }), pod("p1")],
      podMetrics: [sample("p0", { cpu: "10m" }), sample("p1", { cpu: "10m" })],
      rescale: undefined,
      desired: 0,
      conditions: { ScalingActive: "False/FailedGetResourceMetric" }
    },
    {
      name: "a custom pods metric fails (no custom metrics API) while cpu wants more pods: cpu wins",
      hpa: hpa({
        metrics: [
          { type: "Pods", pods: { metric: { name: "qps" }, target: { type: "AverageValue", averageValue: "10" } } },
          { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }
        ]
      }),
      current: 2,
      ...fleet(2, "75m"),
      rescale: 3,
      desired: 3,
      conditions: { ScalingActive: "True/ValidMetricFound" }
    },
    {
      name: "a failed metric blocks a scale-down (it might have wanted more)",
      hpa: hpa({
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
        metrics: [
          { type: "Pods", pods: { metric: { name: "qps" }, target: { type: "AverageValue", averageValue: "10" } } },
          { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }
        ]
      }),
      current: 4,
      ...fleet(4, "10m"),
      rescale: undefined,
      desired: 0,
      conditions: { ScalingActive: "False/FailedGetPodsMetric" }
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const out = sync({ hpa: c.hpa ?? hpa(), scale: scale(c.current), pods: c.pods, podMetrics: c.podMetrics })
      expect(out.decision.rescale?.replicas).toBe(c.rescale)
      if (c.reason !== undefined) expect(out.decision.rescale?.reason).toBe(c.reason)
      for (const [type, want] of Object.entries(c.conditions)) expect(brief(out.status, type), type).toBe(want)
      expect(out.status["desiredReplicas"]).toBe(c.desired)
      if (c.current !== 0) expect(out.status["currentReplicas"]).toBe(c.current)
      if (c.utilization !== undefined) expect(out.status["currentMetrics"][0].resource.current.averageUtilization).toBe(c.utilization)
    })
  }

  it("words the rescale Event and the status as upstream", () => {
    const out = sync({ hpa: hpa(), scale: scale(2), ...fleet(2, "200m") })
    expect(out.events).toEqual([{ type: "Normal", reason: "SuccessfulRescale", message: "New size: 4; reason: cpu resource utilization (percentage of request) above target" }])
    expect(out.status).toMatchObject({
      currentReplicas: 2,
      desiredReplicas: 4,
      lastScaleTime: iso(T0),
      currentMetrics: [{ type: "Resource", resource: { name: "cpu", current: { averageUtilization: 200, averageValue: "200m" } } }]
    })
    expect(condition(out.status, "AbleToScale")).toMatchObject({ message: "the HPA controller was able to update the target scale to 4" })
    expect(condition(out.status, "ScalingActive")).toMatchObject({
      message: "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
    })
    expect(condition(out.status, "ScalingLimited")).toMatchObject({ message: "the desired replica count is increasing faster than the maximum scale rate" })
  })

  it("explains a missing metric in the condition, the Events and a `type: \"\"` status entry", () => {
    const out = sync({ hpa: hpa({}, { desiredReplicas: 2 }), scale: scale(2), pods: [pod("p0"), pod("p1")], podMetrics: [] })
    expect(condition(out.status, "ScalingActive")?.["message"]).toBe(
      "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    )
    expect(out.events.map((e) => `${e.type} ${e.reason}: ${e.message}`)).toEqual([
      "Warning FailedGetResourceMetric: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API",
      "Warning FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    ])
    expect(out.status["currentMetrics"]).toEqual([{ type: "" }])
    expect(out.status["desiredReplicas"]).toBe(2)
    expect(out.decision.error).toMatch(/^failed to compute desired number of replicas based on listed metrics for Deployment\/default\/web: /)
  })

  it("reports a missing request with the container and pod", () => {
    const out = sync({ hpa: hpa(), scale: scale(1), pods: [pod("p0", { cpu: null })], podMetrics: [sample("p0", { cpu: "10m" })] })
    expect(condition(out.status, "ScalingActive")?.["message"]).toBe(
      "the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu in container app of Pod p0"
    )
  })

  it("reports a target it cannot read as FailedGetScale, and leaves the rest of the status", () => {
    const before = { currentReplicas: 3, desiredReplicas: 3 }
    const out = sync({ hpa: hpa({}, before), scale: { error: 'deployments.apps "web" not found' } })
    expect(out.decision.rescale).toBeUndefined()
    expect(out.status).toMatchObject(before)
    expect(condition(out.status, "AbleToScale")).toMatchObject({
      status: "False",
      reason: "FailedGetScale",
      message: `the HPA controller was unable to get the target's current scale: deployments.apps "web" not found`
    })
    expect(out.events).toEqual([{ type: "Warning", reason: "FailedGetScale", message: 'deployments.apps "web" not found' }])
  })

  it("a failed scale write keeps the old desired count and says why", () => {
    const out = sync({ hpa: hpa({}, { currentReplicas: 2, desiredReplicas: 2 }), scale: scale(2), ...fleet(2, "200m") }, T0, { _tag: "Failed", message: "etcd is sad" })
    expect(out.status["desiredReplicas"]).toBe(2)
    expect(out.status["lastScaleTime"]).toBeUndefined()
    expect(condition(out.status, "AbleToScale")).toMatchObject({ status: "False", reason: "FailedUpdateScale", message: "the HPA controller was unable to update the target scale: etcd is sad" })
    expect(out.events).toContainEqual({
      type: "Warning",
      reason: "FailedRescale",
      message: "New size: 4; reason: cpu resource utilization (percentage of request) above target; error: etcd is sad"
    })
  })

  it("writes no status when nothing changed", () => {
    const first = sync({ hpa: hpa(), scale: scale(4), ...fleet(4, "50m") })
    const again = Hpa.decide({ hpa: hpa({}, first.status), scale: scale(4), ...fleet(4, "50m"), history: first.history }, settings, T0 + 15_000)
    expect(Hpa.settle(hpa({}, first.status), again, undefined, T0 + 15_000).status).toBeUndefined()
  })
})

/**
 * Syncs over time: each step runs `decide` then `settle` at `t` seconds after T0 with the
 * recorded history, the size it wrote becoming the next step's current size.
 */
const run = (spec: Json, steps: ReadonlyArray<readonly [t: number, usageMilli: number]>, start: number, requestMilli = 100) => {
  let current = start
  let history: Hpa.History | undefined
  let status: Json = {}
  const sizes: Array<number> = []
  const limits: Array<string> = []
  for (const [t, usage] of steps) {
    const now = T0 + t * 1000
    const pods = Array.from({ length: current }, (_, i) => pod(`p${i}`, { cpu: `${requestMilli}m` }))
    const podMetrics = pods.map((_, i) => sample(`p${i}`, { cpu: `${usage}m` }, now - 5_000))
    const h = hpa(spec, status)
    const decision = Hpa.decide({ hpa: h, scale: scale(current), pods, podMetrics, history }, settings, now)
    const settled = Hpa.settle(h, decision, decision.rescale === undefined ? undefined : { _tag: "Written" }, now)
    history = settled.history
    status = settled.status ?? status
    if (decision.rescale !== undefined) current = decision.rescale.replicas
    sizes.push(current)
    limits.push(String(brief(status, "ScalingLimited") ?? brief(status, "AbleToScale")))
  }
  return { sizes, limits }
}

describe("HorizontalPodAutoscaler.decide over time (stabilization windows and policies)", () => {
  const cases: ReadonlyArray<{
    readonly name: string
    readonly spec: Json
    readonly start: number
    readonly steps: ReadonlyArray<readonly [number, number]>
    readonly sizes: ReadonlyArray<number>
  }> = [
    {
      name: "no behavior: scale-down only after the 300 s window has no higher recommendation",
      spec: {},
      start: 4,
      // 4 pods at 10% of request (target 50%) want 1.
      steps: [[0, 10], [60, 10], [299, 10], [301, 10], [320, 10]],
      sizes: [4, 4, 4, 1, 1]
    },
    {
      name: "no behavior: a high recommendation inside the window holds the size",
      spec: {},
      start: 2,
      // Up to 4 at once (the ×2 limit); the t=0 recommendation (4) holds the size until it is 300 s old.
      steps: [[0, 100], [15, 10], [200, 10], [299, 10], [301, 10]],
      sizes: [4, 4, 4, 4, 1]
    },
    {
      name: "behavior: scaleDown window 60 s",
      spec: { behavior: { scaleDown: { stabilizationWindowSeconds: 60 } } },
      start: 4,
      steps: [[0, 10], [30, 10], [61, 10]],
      sizes: [4, 4, 1]
    },
    {
      name: "behavior: scaleUp window 30 s keeps the lowest recent recommendation",
      spec: { behavior: { scaleUp: { stabilizationWindowSeconds: 30 }, scaleDown: { stabilizationWindowSeconds: 0 } } },
      start: 2,
      steps: [[0, 50], [10, 100], [20, 100], [41, 100]],
      // t=0 recommends 2; t=10 and t=20 want 4 but 2 is within 30 s; at t=41 the lowest recent is 4.
      sizes: [2, 2, 2, 4]
    },
    {
      name: "behavior: scaleUp Pods policy, 1 pod per 60 s",
      spec: { maxReplicas: 20, behavior: { scaleUp: { policies: [{ type: "Pods", value: 1, periodSeconds: 60 }] } } },
      start: 2,
      steps: [[0, 400], [15, 400], [61, 400], [75, 400], [122, 400]],
      sizes: [3, 3, 4, 4, 5]
    },
    {
      name: "behavior: scaleUp Percent 50% per 60 s",
      spec: { maxReplicas: 50, behavior: { scaleUp: { policies: [{ type: "Percent", value: 50, periodSeconds: 60 }] } } },
      start: 4,
      steps: [[0, 1000], [30, 1000], [61, 1000]],
      sizes: [6, 6, 9]
    },
    {
      name: "behavior: selectPolicy Max takes the larger of Pods 1 and Percent 100%",
      spec: {
        maxReplicas: 50,
        behavior: { scaleUp: { selectPolicy: "Max", policies: [{ type: "Pods", value: 1, periodSeconds: 60 }, { type: "Percent", value: 100, periodSeconds: 60 }] } }
      },
      start: 3,
      steps: [[0, 1000]],
      sizes: [6]
    },
    {
      name: "behavior: selectPolicy Min takes the smaller",
      spec: {
        maxReplicas: 50,
        behavior: { scaleUp: { selectPolicy: "Min", policies: [{ type: "Pods", value: 1, periodSeconds: 60 }, { type: "Percent", value: 100, periodSeconds: 60 }] } }
      },
      start: 3,
      steps: [[0, 1000]],
      sizes: [4]
    },
    {
      name: "behavior: selectPolicy Disabled never scales down",
      spec: { behavior: { scaleDown: { selectPolicy: "Disabled", stabilizationWindowSeconds: 0 } } },
      start: 5,
      steps: [[0, 1], [15, 1], [400, 1]],
      sizes: [5, 5, 5]
    },
    {
      name: "behavior: scaleDown Pods 1 per 30 s after a 0 s window",
      spec: { behavior: { scaleDown: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 1, periodSeconds: 30 }] } } },
      start: 4,
      steps: [[0, 1], [15, 1], [31, 1], [62, 1], [93, 1]],
      sizes: [3, 3, 2, 1, 1]
    },
    {
      name: "behavior: defaults scale up by max(+4 pods, +100%) per 15 s",
      spec: { maxReplicas: 100, behavior: {} },
      start: 1,
      steps: [[0, 10_000], [16, 10_000], [32, 10_000]],
      sizes: [5, 10, 20]
    }
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(run(c.spec, c.steps, c.start).sizes).toEqual(c.sizes)
    })
  }

  it("says which limit held the size back", () => {
    const { limits } = run({ maxReplicas: 20, behavior: { scaleUp: { policies: [{ type: "Pods", value: 1, periodSeconds: 60 }] } } }, [[0, 400]], 2)
    expect(limits).toEqual(["True/ScaleUpLimit"])
    const down = run({ behavior: { scaleDown: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 1, periodSeconds: 30 }] } } }, [[0, 1]], 4)
    expect(down.limits).toEqual(["True/ScaleDownLimit"])
  })
})

