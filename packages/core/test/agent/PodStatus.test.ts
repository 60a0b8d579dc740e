import { describe, expect, it } from "vitest"
import * as PodStatus from "../../src/agent/PodStatus.js"
import type * as PodSync from "../../src/agent/PodSync.js"
import type * as Probes from "../../src/agent/Probes.js"
import type * as Pod from "../../src/model/Pod.js"

const T0 = Date.parse("2024-05-01T10:00:00Z")
const at = (s: number) => T0 + s * 1000
const iso = (s: number) => new Date(at(s)).toISOString().replace(/\.\d+Z$/, "Z")

const pod = (spec: Partial<Pod.PodSpec> = {}, status?: Pod.PodStatus, meta: Partial<Pod.Pod["metadata"]> = {}): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", ...meta },
  spec: { containers: [{ name: "app", image: "node:20" }], ...spec },
  ...(status === undefined ? {} : { status })
})

const c = (name: string, attempt: number, state: PodSync.ObservedContainer["state"], o: Partial<PodSync.ObservedContainer> = {}): PodSync.ObservedContainer => ({
  id: `${name}-${attempt}`,
  name,
  attempt,
  init: false,
  hash: "",
  state,
  createdAtMs: at(attempt),
  ...(state !== "created" ? { startedAtMs: at(attempt + 1) } : {}),
  ...(state === "exited" ? { exitCode: 0, finishedAtMs: at(attempt + 2) } : {}),
  ...o
})

const status = (p: Pod.Pod, containers: ReadonlyArray<PodSync.ObservedContainer>, o: Partial<PodStatus.Input> = {}) =>
  PodStatus.compute({
    pod: p,
    containers,
    probes: new Map(),
    waiting: new Map(),
    sandboxReady: true,
    hostIP: "10.0.0.5",
    podIP: "10.0.0.5",
    hostPorts: [],
    startTime: iso(0),
    runtimeName: "kbox",
    nowMs: at(100),
    ...o
  })

const cond = (s: Pod.PodStatus, type: string) => s.conditions?.find((x) => x.type === type)

describe("PodStatus.compute", () => {
  it("reports a running, ready pod as the kubelet does", () => {
    const s = status(pod(), [c("app", 0, "running")])
    expect(s.phase).toBe("Running")
    expect(s.conditions?.map((x) => `${x.type}=${x.status}`)).toEqual(["PodReadyToStartContainers=True", "Initialized=True", "Ready=True", "ContainersReady=True", "PodScheduled=True"])
    expect(s.containerStatuses).toEqual([
      { name: "app", image: "node:20", imageID: "", containerID: "kbox://app-0", restartCount: 0, state: { running: { startedAt: iso(1) } }, lastState: {}, ready: true, started: true }
    ])
    expect(s).toMatchObject({ hostIP: "10.0.0.5", hostIPs: [{ ip: "10.0.0.5" }], podIP: "10.0.0.5", podIPs: [{ ip: "10.0.0.5" }], startTime: iso(0), qosClass: "BestEffort" })
  })

  it("a container not created yet waits ContainerCreating; the pod is Pending and not ready", () => {
    const s = status(pod(), [])
    expect(s.phase).toBe("Pending")
    expect(s.containerStatuses?.[0]).toMatchObject({ state: { waiting: { reason: "ContainerCreating" } }, ready: false, restartCount: 0 })
    expect(cond(s, "Ready")).toMatchObject({ status: "False", reason: "ContainersNotReady", message: "containers with unready status: [app]" })
  })

  it("crash loop: waiting CrashLoopBackOff, lastState the exit, restartCount the attempt", () => {
    const s = status(pod(), [c("app", 2, "exited", { exitCode: 1 }), c("app", 1, "exited", { exitCode: 1 })], {
      waiting: new Map([["app", { reason: "CrashLoopBackOff", message: "back-off 20s restarting failed container=app pod=web_default(u1)" }]])
    })
    expect(s.phase).toBe("Running")
    expect(s.containerStatuses?.[0]).toMatchObject({
      restartCount: 2,
      state: { waiting: { reason: "CrashLoopBackOff" } },
      lastState: { terminated: { exitCode: 1, reason: "Error", containerID: "kbox://app-2", startedAt: iso(3), finishedAt: iso(4) } },
      ready: false
    })
  })

  it("after a restart: running, lastState the previous run, restartCount 1", () => {
    const s = status(pod(), [c("app", 1, "running"), c("app", 0, "exited", { exitCode: 137, reason: "OOMKilled", signal: "SIGKILL" })])
    expect(s.containerStatuses?.[0]).toMatchObject({ restartCount: 1, state: { running: {} }, lastState: { terminated: { exitCode: 137, reason: "OOMKilled", signal: 9 } } })
  })

  const phases: ReadonlyArray<[string, Partial<Pod.PodSpec>, ReadonlyArray<PodSync.ObservedContainer>, Pod.PodPhase]> = [
    ["Never + exit 0: Succeeded", { restartPolicy: "Never" }, [c("app", 0, "exited")], "Succeeded"],
    ["Never + exit 1: Failed", { restartPolicy: "Never" }, [c("app", 0, "exited", { exitCode: 1 })], "Failed"],
    ["OnFailure + exit 1: Running (restarting)", { restartPolicy: "OnFailure" }, [c("app", 0, "exited", { exitCode: 1 })], "Running"],
    ["Always + exited: Running (restarting)", {}, [c("app", 0, "exited")], "Running"],
    [
      "init running: Pending",
      { initContainers: [{ name: "init", image: "i" }] },
      [c("init", 0, "running", { init: true })],
      "Pending"
    ],
    ["init failed with Never: Failed", { restartPolicy: "Never", initContainers: [{ name: "init", image: "i" }] }, [c("init", 0, "exited", { init: true, exitCode: 1 })], "Failed"],
    ["one of two running: Pending", { containers: [{ name: "app", image: "i" }, { name: "b", image: "i" }] }, [c("app", 0, "running")], "Pending"]
  ]
  it.each(phases)("phase: %s", (_name, spec, containers, want) => {
    expect(status(pod(spec), containers).phase).toBe(want)
  })

  it("init containers: PodInitializing, Initialized False with the incomplete ones", () => {
    const p = pod({ initContainers: [{ name: "first", image: "i" }, { name: "second", image: "i" }] })
    const s = status(p, [c("first", 0, "exited", { init: true })])
    expect(s.initContainerStatuses?.map((x) => [x.name, x.ready, Object.keys(x.state ?? {})[0]])).toEqual([
      ["first", true, "terminated"],
      ["second", false, "waiting"]
    ])
    expect(s.containerStatuses?.[0]?.state).toEqual({ waiting: { reason: "PodInitializing" } })
    expect(cond(s, "Initialized")).toMatchObject({ status: "False", reason: "ContainersNotInitialized", message: "containers with incomplete status: [second]" })
  })

  it("readiness: a failing probe keeps the pod unready, a started container is reported", () => {
    const probes = new Map<string, Probes.Verdict>([["app-0", { started: true, ready: false, livenessFailed: false, startupFailed: false }]])
    const s = status(pod(), [c("app", 0, "running")], { probes })
    expect(s.containerStatuses?.[0]).toMatchObject({ ready: false, started: true })
    expect(cond(s, "ContainersReady")?.status).toBe("False")
  })

  it("a container whose probes have not answered yet is started but not ready (readiness) or neither (startup)", () => {
    const probe = { exec: { command: ["check"] } }
    expect(status(pod({ containers: [{ name: "app", image: "i", readinessProbe: probe }] }), [c("app", 0, "running")]).containerStatuses?.[0]).toMatchObject({ ready: false, started: true })
    expect(status(pod({ containers: [{ name: "app", image: "i", startupProbe: probe }] }), [c("app", 0, "running")]).containerStatuses?.[0]).toMatchObject({ ready: false, started: false })
  })

  it("keeps lastTransitionTime while a condition holds, and other writers' conditions", () => {
    const before = status(pod(), [c("app", 0, "running")], { nowMs: at(10) })
    const disruption = { type: "DisruptionTarget", status: "True" as const, reason: "EvictionByEvictionAPI", lastTransitionTime: iso(50) }
    const after = status(pod({}, { ...before, conditions: [disruption, ...(before.conditions ?? [])] }), [c("app", 0, "running")], { nowMs: at(90) })
    expect(cond(after, "Ready")?.lastTransitionTime).toBe(iso(10))
    expect(cond(after, "DisruptionTarget")).toEqual(disruption)
    const unready = status(pod({}, before), [c("app", 0, "exited", { exitCode: 1 })], { nowMs: at(95), waiting: new Map([["app", { reason: "CrashLoopBackOff" }]]) })
    expect(cond(unready, "Ready")?.lastTransitionTime).toBe(iso(95))
    expect(PodStatus.same(after, status(pod({}, after), [c("app", 0, "running")], { nowMs: at(200) }))).toBe(true)
  })

  it("a refused pod fails with the admission reason", () => {
    const s = status(pod(), [], { fail: { reason: "OutOfcpu", message: "Pod was rejected: ..." }, sandboxReady: false })
    expect(s).toMatchObject({ phase: "Failed", reason: "OutOfcpu", message: "Pod was rejected: ..." })
  })

  it("a deleted pod whose containers stopped gets a terminal phase", () => {
    const p = pod({}, undefined, { deletionTimestamp: iso(50) })
    expect(status(p, [c("app", 0, "exited", { exitCode: 143 })]).phase).toBe("Failed")
    expect(status(p, [c("app", 0, "exited", { exitCode: 0 })]).phase).toBe("Succeeded")
  })

  it("reports the host ports", () => {
    const s = status(pod(), [c("app", 0, "running")], { hostPorts: [{ containerName: "app", name: "http", containerPort: 8080, protocol: "TCP", hostPort: 31000 }] })
    expect((s as Record<string, unknown>)["hostPorts"]).toEqual([{ containerName: "app", name: "http", containerPort: 8080, protocol: "TCP", hostPort: 31000 }])
  })

  const qos: ReadonlyArray<[string, Pod.ResourceRequirements | undefined, string]> = [
    ["nothing: BestEffort", undefined, "BestEffort"],
    ["requests only: Burstable", { requests: { cpu: "100m" } }, "Burstable"],
    ["limits only (requests default to them): Guaranteed", { limits: { cpu: "1", memory: "1Gi" } }, "Guaranteed"],
    ["requests equal limits: Guaranteed", { requests: { cpu: "1000m", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } }, "Guaranteed"],
    ["cpu limit only: Burstable", { limits: { cpu: "1" } }, "Burstable"]
  ]
  it.each(qos)("qosClass: %s", (_name, resources, want) => {
    expect(PodStatus.qosClassOf({ containers: [{ name: "a", image: "i", ...(resources === undefined ? {} : { resources }) }] })).toBe(want)
  })
})
