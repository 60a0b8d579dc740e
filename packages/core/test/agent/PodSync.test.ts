import { describe, expect, it } from "vitest"
import * as ContainerIdentity from "../../src/agent/ContainerIdentity.js"
import * as PodSync from "../../src/agent/PodSync.js"
import type * as Probes from "../../src/agent/Probes.js"
import type * as CrashLoopBackoff from "../../src/agent/CrashLoopBackoff.js"
import type * as Pod from "../../src/model/Pod.js"

const pod = (spec: Partial<Pod.PodSpec> = {}, meta: Partial<Pod.Pod["metadata"]> = {}): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", ...meta },
  spec: { containers: [{ name: "app", image: "node:20" }], ...spec }
})

const hashes = new Map<string, string>()
const hashOf = (c: Pod.Container) => hashes.get(c.name) ?? ContainerIdentity.hashOf(c)

let nextId = 0
const c = (name: string, attempt: number, state: PodSync.ObservedContainer["state"], o: Partial<PodSync.ObservedContainer> = {}): PodSync.ObservedContainer => ({
  id: o.id ?? `${name}-${attempt}-${nextId++}`,
  name,
  attempt,
  init: false,
  hash: ContainerIdentity.hashOf({ name, image: "node:20" }),
  state,
  createdAtMs: attempt * 1000,
  ...(state !== "created" ? { startedAtMs: attempt * 1000 + 100 } : {}),
  ...(state === "exited" ? { exitCode: 0, finishedAtMs: 100_000 } : {}),
  ...o
})

interface Case {
  readonly name: string
  readonly pod: Pod.Pod | undefined
  readonly containers: ReadonlyArray<PodSync.ObservedContainer>
  readonly probes?: ReadonlyMap<string, Probes.Verdict>
  readonly backoff?: ReadonlyMap<string, CrashLoopBackoff.Entry>
  readonly terminal?: boolean
  readonly startTimeMs?: number
  readonly nowMs?: number
  /** Actions as `Tag:container[#attempt]`. */
  readonly actions: ReadonlyArray<string>
  readonly waiting?: Record<string, string>
  readonly requeue?: number
  readonly fail?: string
}

const summary = (a: PodSync.Action): string => {
  switch (a._tag) {
    case "Start":
      return `Start:${a.container.name}#${a.attempt}${a.init ? ":init" : ""}`
    case "StartCreated":
      return `StartCreated:${a.name}`
    case "Kill":
      return `Kill:${a.name}:${a.gracePeriodSeconds}s${a.preStop ? ":preStop" : ""}`
    case "Remove":
      return `Remove:${a.name}`
    case "ConfirmDeletion":
    case "Cleanup":
      return a._tag
  }
}

const inits = (...names: ReadonlyArray<string>): Partial<Pod.PodSpec> => ({ initContainers: names.map((name) => ({ name, image: "node:20" })) })
const failedProbe = (id: string, v: Partial<Probes.Verdict>) => new Map([[id, { started: true, ready: true, livenessFailed: false, startupFailed: false, ...v }]])

const cases: ReadonlyArray<Case> = [
  { name: "a new pod starts its container at attempt 0", pod: pod(), containers: [], actions: ["Start:app#0"] },
  { name: "a running container is left alone", pod: pod(), containers: [c("app", 0, "running")], actions: [] },
  {
    name: "re-adoption: a running attempt 3 is never duplicated",
    pod: pod({ containers: [{ name: "app", image: "node:20" }, { name: "side", image: "node:20" }] }),
    containers: [c("app", 3, "running"), c("app", 2, "exited"), c("side", 0, "running")],
    actions: []
  },
  { name: "a created-but-not-started container is started, not recreated", pod: pod(), containers: [c("app", 1, "created"), c("app", 0, "exited")], actions: ["StartCreated:app"] },
  {
    name: "init containers run one at a time, in order",
    pod: pod(inits("first", "second")),
    containers: [],
    actions: ["Start:first#0:init"]
  },
  {
    name: "the next init container starts when the previous exited 0",
    pod: pod(inits("first", "second")),
    containers: [c("first", 0, "exited", { init: true })],
    actions: ["Start:second#0:init"]
  },
  { name: "a running init container blocks the rest", pod: pod(inits("first", "second")), containers: [c("first", 0, "running", { init: true })], actions: [] },
  {
    name: "regular containers start once every init container succeeded",
    pod: pod(inits("first", "second")),
    containers: [c("first", 0, "exited", { init: true }), c("second", 0, "exited", { init: true })],
    actions: ["Start:app#0"]
  },
  {
    name: "a failed init container restarts (policy Always), the later ones wait",
    pod: pod(inits("first", "second")),
    containers: [c("first", 0, "exited", { init: true, exitCode: 1, finishedAtMs: 100_000 })],
    nowMs: 100_000,
    actions: ["Start:first#1:init"]
  },
  {
    name: "a failed init container with policy Never fails the pod: nothing starts",
    pod: pod({ ...inits("first", "second"), restartPolicy: "Never" }),
    containers: [c("first", 0, "exited", { init: true, exitCode: 1 })],
    actions: []
  },
  {
    name: "a failed init container in backoff waits with CrashLoopBackOff",
    pod: pod(inits("first")),
    containers: [c("first", 1, "exited", { init: true, exitCode: 1, finishedAtMs: 100_000 }), c("first", 0, "exited", { init: true, exitCode: 1 })],
    backoff: new Map([["first", { delayMs: 10_000, lastUpdateMs: 95_000 }]]),
    nowMs: 104_000,
    actions: [],
    waiting: { first: "CrashLoopBackOff" },
    requeue: 6_000
  },
  {
    name: "init containers never run again once a regular container exists",
    pod: pod(inits("first")),
    containers: [c("app", 0, "running")],
    actions: []
  },
  {
    name: "restartPolicy Always: an exit 0 restarts at once the first time",
    pod: pod(),
    containers: [c("app", 0, "exited", { exitCode: 0, finishedAtMs: 100_000 })],
    nowMs: 100_500,
    actions: ["Start:app#1"]
  },
  {
    name: "restartPolicy OnFailure: an exit 0 is final",
    pod: pod({ restartPolicy: "OnFailure" }),
    containers: [c("app", 0, "exited", { exitCode: 0 })],
    actions: []
  },
  {
    name: "restartPolicy OnFailure: a failure restarts",
    pod: pod({ restartPolicy: "OnFailure" }),
    containers: [c("app", 0, "exited", { exitCode: 2 })],
    actions: ["Start:app#1"]
  },
  { name: "restartPolicy Never: a failure is final", pod: pod({ restartPolicy: "Never" }), containers: [c("app", 0, "exited", { exitCode: 2 })], actions: [] },
  {
    name: "crash loop: inside the backoff the container waits",
    pod: pod(),
    containers: [c("app", 2, "exited", { exitCode: 1, finishedAtMs: 100_000 }), c("app", 1, "exited", { exitCode: 1 })],
    backoff: new Map([["app", { delayMs: 20_000, lastUpdateMs: 90_000 }]]),
    nowMs: 105_000,
    actions: [],
    waiting: { app: "CrashLoopBackOff" },
    requeue: 15_000
  },
  {
    name: "crash loop: after the backoff it restarts with the next attempt",
    pod: pod(),
    containers: [c("app", 2, "exited", { exitCode: 1, finishedAtMs: 100_000 }), c("app", 1, "exited", { exitCode: 1 })],
    backoff: new Map([["app", { delayMs: 20_000, lastUpdateMs: 90_000 }]]),
    nowMs: 121_000,
    actions: ["Start:app#3"]
  },
  {
    name: "a failed liveness probe kills the container gracefully (restart follows)",
    pod: pod({ terminationGracePeriodSeconds: 5 }),
    containers: [c("app", 0, "running", { id: "live" })],
    probes: failedProbe("live", { livenessFailed: true }),
    actions: ["Kill:app:5s:preStop"],
    requeue: 0
  },
  {
    name: "a failed startup probe kills the container too",
    pod: pod({ terminationGracePeriodSeconds: 5 }),
    containers: [c("app", 0, "running", { id: "slow" })],
    probes: failedProbe("slow", { startupFailed: true, started: false }),
    actions: ["Kill:app:5s:preStop"],
    requeue: 0
  },
  {
    name: "a changed spec (new image) restarts the container",
    pod: pod({ containers: [{ name: "app", image: "node:22" }] }),
    containers: [c("app", 0, "running")],
    actions: ["Kill:app:30s:preStop"],
    requeue: 0
  },
  {
    name: "dead attempts beyond the newest two are removed",
    pod: pod(),
    containers: [c("app", 3, "running"), c("app", 2, "exited"), c("app", 1, "exited"), c("app", 0, "exited")],
    actions: ["Remove:app", "Remove:app"]
  },
  {
    name: "an older running copy is stopped",
    pod: pod(),
    containers: [c("app", 1, "running"), c("app", 0, "running")],
    actions: ["Kill:app:2s"]
  },
  {
    name: "deletion: running containers are killed with the deletion grace period, preStop first",
    pod: pod({ terminationGracePeriodSeconds: 30 }, { deletionTimestamp: "2024-01-01T00:00:00Z", deletionGracePeriodSeconds: 7 }),
    containers: [c("app", 0, "running")],
    actions: ["Kill:app:7s:preStop"],
    requeue: 0
  },
  {
    name: "deletion: grace 0 still gives the kubelet's minimum of 2 s",
    pod: pod({}, { deletionTimestamp: "2024-01-01T00:00:00Z", deletionGracePeriodSeconds: 0 }),
    containers: [c("app", 0, "running")],
    actions: ["Kill:app:2s:preStop"],
    requeue: 0
  },
  {
    name: "deletion: once nothing runs, the deletion is confirmed",
    pod: pod({}, { deletionTimestamp: "2024-01-01T00:00:00Z", deletionGracePeriodSeconds: 30 }),
    containers: [c("app", 0, "exited", { exitCode: 143 })],
    actions: ["ConfirmDeletion"]
  },
  {
    name: "gone from the API: running containers are killed",
    pod: undefined,
    containers: [c("app", 0, "running"), c("app", 1, "created")],
    actions: ["Kill:app:2s"],
    requeue: 0
  },
  {
    name: "gone from the API: dead containers are removed and the pod cleaned up",
    pod: undefined,
    containers: [c("app", 0, "exited"), c("app", 1, "exited")],
    actions: ["Remove:app", "Remove:app", "Cleanup"]
  },
  { name: "gone and nothing left: cleanup only", pod: undefined, containers: [], actions: ["Cleanup"] },
  {
    name: "terminal (refused by admission): nothing starts",
    pod: pod(),
    containers: [],
    terminal: true,
    actions: []
  },
  {
    name: "past activeDeadlineSeconds: killed and failed",
    pod: pod({ activeDeadlineSeconds: 60, terminationGracePeriodSeconds: 3 }),
    containers: [c("app", 0, "running")],
    startTimeMs: 0,
    nowMs: 60_000,
    actions: ["Kill:app:3s:preStop"],
    fail: "DeadlineExceeded"
  },
  {
    name: "before activeDeadlineSeconds: a requeue at the deadline",
    pod: pod({ activeDeadlineSeconds: 60 }),
    containers: [c("app", 0, "running")],
    startTimeMs: 0,
    nowMs: 45_000,
    actions: [],
    requeue: 15_000
  }
]

describe("PodSync.decide", () => {
  it.each(cases)("$name", (t) => {
    const d = PodSync.decide({
      pod: t.pod,
      containers: t.containers,
      probes: t.probes ?? new Map(),
      backoff: t.backoff ?? new Map(),
      terminal: t.terminal ?? false,
      ...(t.startTimeMs === undefined ? {} : { startTimeMs: t.startTimeMs }),
      hashOf,
      nowMs: t.nowMs ?? 200_000
    })
    expect(d.actions.map(summary)).toEqual(t.actions)
    expect(Object.fromEntries([...d.waiting].map(([k, w]) => [k, w.reason]))).toEqual(t.waiting ?? {})
    expect(d.requeueAfterMs).toBe(t.requeue)
    expect(d.fail?.reason).toBe(t.fail)
  })

  it("records the backoff of a restart and doubles it on the next", () => {
    const input = { pod: pod(), probes: new Map(), terminal: false, hashOf }
    const first = PodSync.decide({ ...input, containers: [c("app", 0, "exited", { exitCode: 1, finishedAtMs: 1_000 })], backoff: new Map(), nowMs: 1_000 })
    expect(first.backoff.get("app")).toEqual({ delayMs: 10_000, lastUpdateMs: 1_000 })
    const second = PodSync.decide({ ...input, containers: [c("app", 1, "exited", { exitCode: 1, finishedAtMs: 2_000 })], backoff: first.backoff, nowMs: 12_000 })
    expect(second.actions.map(summary)).toEqual(["Start:app#2"])
    expect(second.backoff.get("app")).toEqual({ delayMs: 20_000, lastUpdateMs: 12_000 })
  })

  it("says why a container waits, as the kubelet does", () => {
    const d = PodSync.decide({
      pod: pod(),
      containers: [c("app", 1, "exited", { exitCode: 1, finishedAtMs: 100_000 })],
      probes: new Map(),
      backoff: new Map([["app", { delayMs: 40_000, lastUpdateMs: 90_000 }]]),
      terminal: false,
      hashOf,
      nowMs: 100_000
    })
    expect(d.waiting.get("app")).toEqual({ reason: "CrashLoopBackOff", message: "back-off 40s restarting failed container=app pod=web_default(u1)" })
  })
})
