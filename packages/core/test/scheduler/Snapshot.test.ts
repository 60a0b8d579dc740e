import { describe, expect, it } from "vitest"
import * as Snapshot from "../../src/scheduler/Snapshot.js"

type Json = Record<string, unknown>

const container = (requests: Record<string, string> | undefined, extra: Json = {}): Json => ({
  name: "c",
  image: "x",
  ...(requests === undefined ? {} : { resources: { requests } }),
  ...extra
})

const pod = (name: string, spec: Json = {}, extra: { uid?: string; phase?: string; labels?: Record<string, string> } = {}): Json => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", uid: extra.uid ?? `uid-${name}`, labels: extra.labels ?? {} },
  spec: { containers: [container({ cpu: "100m", memory: "64Mi" })], ...spec },
  status: { phase: extra.phase ?? "Running" }
})

const bound = (name: string, node: string, spec: Json = {}, extra: { uid?: string; phase?: string } = {}) => pod(name, { nodeName: node, ...spec }, extra)

const node = (name: string, labels: Record<string, string> = {}, allocatable: Record<string, string> = { cpu: "4", memory: "8Gi", pods: "110" }): Json => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name, labels },
  spec: {},
  status: { allocatable }
})

const Mi = 1024 * 1024

describe("Snapshot.podInfo requests", () => {
  // [what, spec, milliCpu, memory, extra expectations]
  const cases: ReadonlyArray<[string, Json, number, number, Partial<{ eph: number; gpu: number; nzCpu: number; nzMem: number }>]> = [
    ["one container", { containers: [container({ cpu: "250m", memory: "128Mi" })] }, 250, 128 * Mi, { nzCpu: 250, nzMem: 128 * Mi }],
    ["containers add up", { containers: [container({ cpu: "250m", memory: "128Mi" }), container({ cpu: "1", memory: "1Gi" })] }, 1250, 1152 * Mi, {}],
    ["no requests: zero, but 100m/200Mi for scoring", { containers: [container(undefined)] }, 0, 0, { nzCpu: 100, nzMem: 200 * Mi }],
    ["an explicit zero is not missing", { containers: [container({ cpu: "0", memory: "0" })] }, 0, 0, { nzCpu: 0, nzMem: 0 }],
    ["scoring default per container", { containers: [container({ cpu: "300m" }), container(undefined)] }, 300, 0, { nzCpu: 400, nzMem: 400 * Mi }],
    [
      "a larger init container wins per resource",
      { containers: [container({ cpu: "500m", memory: "1Gi" })], initContainers: [container({ cpu: "2", memory: "256Mi" })] },
      2000,
      1024 * Mi,
      {}
    ],
    [
      "init containers run one at a time (max, not sum)",
      { containers: [container({ cpu: "100m" })], initContainers: [container({ cpu: "1" }), container({ cpu: "1500m" })] },
      1500,
      0,
      {}
    ],
    [
      "a sidecar adds to the containers",
      { containers: [container({ cpu: "500m", memory: "100Mi" })], initContainers: [container({ cpu: "200m", memory: "50Mi" }, { restartPolicy: "Always" })] },
      700,
      150 * Mi,
      {}
    ],
    [
      "an init container after a sidecar runs beside it",
      {
        containers: [container({ cpu: "100m" })],
        initContainers: [container({ cpu: "300m" }, { restartPolicy: "Always" }), container({ cpu: "1" })]
      },
      1300,
      0,
      {}
    ],
    [
      "an init container before a sidecar does not",
      {
        containers: [container({ cpu: "100m" })],
        initContainers: [container({ cpu: "1" }), container({ cpu: "300m" }, { restartPolicy: "Always" })]
      },
      1000,
      0,
      {}
    ],
    ["overhead is added", { containers: [container({ cpu: "1", memory: "1Gi" })], overhead: { cpu: "250m", memory: "120Mi" } }, 1250, 1144 * Mi, {}],
    [
      "overhead on top of the init maximum",
      { containers: [container({ cpu: "100m" })], initContainers: [container({ cpu: "2" })], overhead: { cpu: "100m" } },
      2100,
      0,
      {}
    ],
    [
      "ephemeral storage and extended resources",
      { containers: [container({ cpu: "1", "ephemeral-storage": "1Gi", "nvidia.com/gpu": "2" }), container({ "nvidia.com/gpu": "1" })] },
      1000,
      0,
      { eph: 1024 * Mi, gpu: 3 }
    ],
    ["fractional cpu rounds up to a milli", { containers: [container({ cpu: "0.0001" })] }, 1, 0, {}],
    ["an invalid quantity counts as zero", { containers: [container({ cpu: "lots" })] }, 0, 0, {}]
  ]
  it.each(cases)("%s", (_what, spec, cpu, mem, more) => {
    const info = Snapshot.podInfo(pod("p", spec))
    expect(info.requests.milliCpu).toBe(cpu)
    expect(info.requests.memory).toBe(mem)
    expect(info.requests.pods).toBe(1)
    if (more.eph !== undefined) expect(info.requests.ephemeralStorage).toBe(more.eph)
    if (more.gpu !== undefined) expect(info.requests.scalar["nvidia.com/gpu"]).toBe(more.gpu)
    const n = Snapshot.nodeInfo(node("n"), [info])
    if (more.nzCpu !== undefined) expect(n.nonZeroRequested.milliCpu).toBe(more.nzCpu)
    if (more.nzMem !== undefined) expect(n.nonZeroRequested.memory).toBe(more.nzMem)
  })

  it("reads identity, labels, priority and the node", () => {
    const info = Snapshot.podInfo({ ...bound("web", "n1", { priority: 1000 }), metadata: { name: "web", namespace: "prod", uid: "u1", labels: { app: "web" } } })
    expect(info).toMatchObject({ name: "web", namespace: "prod", uid: "u1", labels: { app: "web" }, priority: 1000, nodeName: "n1" })
    expect(Snapshot.podInfo(pod("pending")).nodeName).toBeUndefined()
    expect(Snapshot.podInfo(pod("pending")).priority).toBe(0)
  })
})

describe("Snapshot.nodeInfo", () => {
  it("adds up its pods, host ports and allocatable", () => {
    const withPorts = pod("a", {
      containers: [container({ cpu: "1" }, { ports: [{ containerPort: 80, hostPort: 8080 }, { containerPort: 53, hostPort: 53, protocol: "UDP", hostIP: "10.0.0.1" }, { containerPort: 9000 }] })],
      initContainers: [container({}, { restartPolicy: "Always", ports: [{ containerPort: 15000, hostPort: 15000 }] }), container({}, { ports: [{ containerPort: 1, hostPort: 1 }] })]
    })
    const n = Snapshot.nodeInfo(node("n1", { zone: "a" }, { cpu: "4", memory: "8Gi", pods: "110", "ephemeral-storage": "100Gi", "example.com/dongle": "3", "hugepages-2Mi": "1Gi" }), [
      Snapshot.podInfo(withPorts),
      Snapshot.podInfo(pod("b"))
    ])
    expect(n.name).toBe("n1")
    expect(n.labels).toEqual({ zone: "a" })
    expect(n.allocatable).toEqual({ milliCpu: 4000, memory: 8 * 1024 * Mi, ephemeralStorage: 100 * 1024 * Mi, pods: 110, scalar: { "example.com/dongle": 3, "hugepages-2Mi": 1024 * Mi } })
    expect(n.requested).toMatchObject({ milliCpu: 1100, memory: 64 * Mi, pods: 2 })
    // A plain init container's port is released before the pod runs; a sidecar's is not.
    expect([...n.usedPorts].sort()).toEqual(["TCP/0.0.0.0/15000", "TCP/0.0.0.0/8080", "UDP/10.0.0.1/53"])
  })

  it("reads taints and cordoning; missing allocatable is zero", () => {
    const n = Snapshot.nodeInfo({ metadata: { name: "x" }, spec: { unschedulable: true, taints: [{ key: "k", effect: "NoSchedule" }] } })
    expect(n.unschedulable).toBe(true)
    expect(n.taints).toEqual([{ key: "k", effect: "NoSchedule" }])
    expect(n.allocatable).toEqual(Snapshot.resources.zero)
  })

  it("withPod and withoutPod leave the original alone", () => {
    const a = Snapshot.podInfo(pod("a"))
    const b = Snapshot.podInfo(pod("b", { containers: [container({ cpu: "1" }, { ports: [{ containerPort: 1, hostPort: 99 }] })] }))
    const base = Snapshot.nodeInfo(node("n"), [a])
    const more = Snapshot.withPod(base, b)
    expect(more.requested.milliCpu).toBe(1100)
    expect(more.usedPorts.has("TCP/0.0.0.0/99")).toBe(true)
    expect(more.generation).toBeGreaterThan(base.generation)
    const less = Snapshot.withoutPod(more, Snapshot.podKey(a))
    expect(less.pods.map((p) => p.name)).toEqual(["b"])
    expect(less.requested.milliCpu).toBe(1000)
    expect(base.pods.map((p) => p.name)).toEqual(["a"])
    expect(base.requested.milliCpu).toBe(100)
  })
})

describe("Snapshot.resources", () => {
  const r = (milliCpu: number, memory: number, scalar: Record<string, number> = {}) => ({ milliCpu, memory, ephemeralStorage: 0, pods: 1, scalar })
  it("adds and subtracts, scalars by name", () => {
    expect(Snapshot.resources.add(r(100, 10, { gpu: 1 }), r(50, 5, { fpga: 2 }))).toEqual({ milliCpu: 150, memory: 15, ephemeralStorage: 0, pods: 2, scalar: { gpu: 1, fpga: 2 } })
    expect(Snapshot.resources.sub(r(100, 10, { gpu: 1 }), r(50, 5, { gpu: 1, fpga: 2 }))).toEqual({ milliCpu: 50, memory: 5, ephemeralStorage: 0, pods: 0, scalar: { gpu: 0, fpga: -2 } })
    expect(Snapshot.resources.add(Snapshot.resources.zero, r(1, 2))).toEqual(r(1, 2))
  })
  it("parses a resource list, ignoring names that are not resources the scheduler counts", () => {
    expect(Snapshot.resources.fromList({ cpu: "1500m", memory: "1Gi", pods: 10, storage: "5Gi", "nvidia.com/gpu": "4" })).toEqual({
      milliCpu: 1500,
      memory: 1024 * Mi,
      ephemeralStorage: 0,
      pods: 10,
      scalar: { "nvidia.com/gpu": 4 }
    })
  })
})

describe("Snapshot.Cache", () => {
  const names = (s: Snapshot.Snapshot) => s.nodes.map((n) => n.name)
  const podsOn = (s: Snapshot.Snapshot, n: string) => s.get(n)?.pods.map((p) => p.name)

  it("counts bound pods only, and moves them with their binding", () => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    cache.addNode(node("n2"))
    cache.addPod(pod("pending"))
    cache.addPod(bound("a", "n1"))
    let s = cache.snapshot()
    expect(names(s)).toEqual(["n1", "n2"])
    expect(podsOn(s, "n1")).toEqual(["a"])
    expect(s.get("n1")?.requested.milliCpu).toBe(100)
    cache.updatePod(bound("pending", "n2"))
    cache.updatePod(bound("a", "n2", { containers: [container({ cpu: "2" })] }))
    s = cache.snapshot()
    expect(podsOn(s, "n1")).toEqual([])
    expect(podsOn(s, "n2")).toEqual(["pending", "a"])
    expect(s.get("n2")?.requested.milliCpu).toBe(2100)
    expect(s.get("missing")).toBeUndefined()
  })

  // [what, final event on the bound pod, counted afterwards]
  const terminal: ReadonlyArray<[string, (c: Snapshot.Cache) => void, boolean]> = [
    ["Succeeded leaves", (c) => c.updatePod(bound("a", "n1", {}, { phase: "Succeeded" })), false],
    ["Failed leaves", (c) => c.updatePod(bound("a", "n1", {}, { phase: "Failed" })), false],
    ["deleted leaves", (c) => c.removePod(bound("a", "n1")), false],
    ["Running stays", (c) => c.updatePod(bound("a", "n1", {}, { phase: "Running" })), true],
    ["a terminating pod still holds its resources", (c) => c.updatePod({ ...bound("a", "n1"), metadata: { name: "a", namespace: "default", uid: "uid-a", deletionTimestamp: "2024-01-01T00:00:00Z" } }), true]
  ]
  it.each(terminal)("%s", (_what, event, counted) => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    cache.addPod(bound("a", "n1"))
    event(cache)
    const n = cache.snapshot().get("n1")!
    expect(n.pods.length).toBe(counted ? 1 : 0)
    expect(n.requested.milliCpu).toBe(counted ? 100 : 0)
  })

  it("a pod added already finished is never counted", () => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    cache.addPod(bound("done", "n1", {}, { phase: "Succeeded" }))
    expect(cache.snapshot().get("n1")?.pods).toEqual([])
  })

  it("assume counts a pod before its binding; the binding confirms it; forget drops only assumed pods", () => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    const p = Snapshot.podInfo(pod("p", { containers: [container({ cpu: "1" })] }))
    expect(cache.assume(p, "n1")).toBe(true)
    expect(cache.assume(p, "n1")).toBe(false)
    expect(cache.isAssumed(Snapshot.podKey(p))).toBe(true)
    let n = cache.snapshot().get("n1")!
    expect(n.requested.milliCpu).toBe(1000)
    expect(n.pods[0]?.nodeName).toBe("n1")
    expect((n.pods[0]?.pod["spec"] as Json)["nodeName"]).toBe("n1")
    // Its own status updates arrive unbound before the binding does: the assumption holds.
    cache.updatePod(pod("p", { containers: [container({ cpu: "1" })] }))
    expect(cache.snapshot().get("n1")!.requested.milliCpu).toBe(1000)
    // The informer shows the binding: confirmed, no longer assumed, counted once.
    cache.updatePod(bound("p", "n1", { containers: [container({ cpu: "1" })] }))
    expect(cache.isAssumed(Snapshot.podKey(p))).toBe(false)
    n = cache.snapshot().get("n1")!
    expect(n.pods.length).toBe(1)
    expect(cache.forget(Snapshot.podKey(p))).toBe(false)
    expect(cache.snapshot().get("n1")!.pods.length).toBe(1)
  })

  it("forget releases an assumed pod whose binding failed", () => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    const p = Snapshot.podInfo(pod("p"))
    cache.assume(p, "n1")
    expect(cache.forget(p.uid)).toBe(true)
    expect(cache.snapshot().get("n1")!.pods).toEqual([])
    expect(cache.isAssumed(p.uid)).toBe(false)
  })

  it("confirmation on another node moves the assumed pod (addPod, as after a re-list)", () => {
    const cache = Snapshot.Cache.make()
    cache.addNode(node("n1"))
    cache.addNode(node("n2"))
    const p = Snapshot.podInfo(pod("p"))
    cache.assume(p, "n1")
    cache.addPod(bound("p", "n2"))
    const s = cache.snapshot()
    expect(podsOn(s, "n1")).toEqual([])
    expect(podsOn(s, "n2")).toEqual(["p"])
  })

  it("keeps pods of a node it has not seen, and shows them when the node arrives", () => {
    const cache = Snapshot.Cache.make()
    cache.addPod(bound("early", "late"))
    expect(names(cache.snapshot())).toEqual([])
    cache.addNode(node("late"))
    expect(podsOn(cache.snapshot(), "late")).toEqual(["early"])
    cache.removeNode(node("late"))
    expect(names(cache.snapshot())).toEqual([])
    cache.addNode(node("late"))
    expect(podsOn(cache.snapshot(), "late")).toEqual(["early"])
  })

  it("lists nodes zone by zone in turn, so a partial search spreads over zones", () => {
    const cache = Snapshot.Cache.make()
    const z = (zone: string) => ({ "topology.kubernetes.io/zone": zone })
    for (const [n, zone] of [["a1", "a"], ["a2", "a"], ["a3", "a"], ["b1", "b"], ["c1", "c"], ["b2", "b"]] as const) cache.addNode(node(n, z(zone)))
    expect(names(cache.snapshot())).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"])
    // A node moving zone reorders the list; zones come in the order their first node was added.
    cache.updateNode(node("a1", z("c")))
    expect(names(cache.snapshot())).toEqual(["a1", "a2", "b1", "c1", "a3", "b2"])
  })

  it("lists the nodes that carry pods with affinity terms", () => {
    const cache = Snapshot.Cache.make()
    for (const n of ["n1", "n2", "n3"]) cache.addNode(node(n))
    const anti = { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [] } } }
    cache.addPod(bound("plain", "n1"))
    cache.addPod(bound("anti", "n2", anti))
    let s = cache.snapshot()
    expect(s.withAffinityPods.map((n) => n.name)).toEqual(["n2"])
    expect(s.withAffinityPods[0]).toBe(s.get("n2"))
    cache.addPod(bound("aff", "n3", { affinity: { podAffinity: {} } }))
    s = cache.snapshot()
    expect(s.withAffinityPods.map((n) => n.name)).toEqual(["n2", "n3"])
    cache.removePod(bound("anti", "n2", anti))
    cache.updatePod(bound("aff", "n3"))
    s = cache.snapshot()
    expect(s.withAffinityPods).toEqual([])
  })

  it("rebuilds only the nodes that changed: the others are the same objects (5,000 nodes, 50,000 pods)", () => {
    const cache = Snapshot.Cache.make()
    const nodeCount = 5000
    for (let i = 0; i < nodeCount; i++) cache.addNode(node(`n${i}`, { "topology.kubernetes.io/zone": `z${i % 3}` }, { cpu: "32", memory: "128Gi", pods: "110" }))
    for (let i = 0; i < 50_000; i++) cache.addPod(bound(`p${i}`, `n${i % nodeCount}`, { containers: [container({ cpu: "100m", memory: "128Mi" })] }))
    const first = cache.snapshot()
    expect(first.nodes.length).toBe(nodeCount)
    expect(first.get("n7")?.pods.length).toBe(10)
    expect(first.get("n7")?.requested.milliCpu).toBe(1000)
    // Nothing changed: the very same snapshot.
    expect(cache.snapshot()).toBe(first)

    // A scheduling cycle's worth of change: one pod assumed, one confirmed elsewhere, one finished.
    cache.assume(Snapshot.podInfo(pod("new")), "n1")
    cache.updatePod(bound("p2", "n2", {}, { phase: "Succeeded" }))
    cache.updateNode(node("n3", { "topology.kubernetes.io/zone": "z0" }, { cpu: "64", memory: "128Gi", pods: "110" }))
    const second = cache.snapshot()
    const changed = new Set(["n1", "n2", "n3"])
    let shared = 0
    for (const n of second.nodes) {
      const before = first.get(n.name)!
      if (changed.has(n.name)) {
        expect(n).not.toBe(before)
        expect(n.generation).toBeGreaterThan(before.generation)
      } else {
        expect(n).toBe(before)
        shared++
      }
    }
    expect(shared).toBe(nodeCount - 3)
    expect(second.nodes).not.toBe(first.nodes)
    // The earlier snapshot is untouched: a cycle in flight keeps its view.
    expect(first.get("n1")!.pods.length).toBe(10)
    expect(second.get("n1")!.pods.length).toBe(11)
    expect(first.get("n2")!.pods.length).toBe(10)
    expect(second.get("n2")!.pods.length).toBe(9)
    expect(second.get("n3")!.allocatable.milliCpu).toBe(64_000)

    // A node leaving rebuilds the list, still sharing every other NodeInfo.
    cache.removeNode(node("n4"))
    const third = cache.snapshot()
    expect(third.nodes.length).toBe(nodeCount - 1)
    expect(third.get("n4")).toBeUndefined()
    expect(second.get("n4")).toBeDefined()
    expect(third.get("n5")).toBe(first.get("n5"))
  })

  it("serves lookups by name without building the list, and every snapshot keeps its own view", () => {
    const cache = Snapshot.Cache.make()
    for (let i = 0; i < 10; i++) cache.addNode(node(`n${i}`))
    const s1 = cache.snapshot()
    expect(s1.nodes).toHaveLength(10)
    cache.assume(Snapshot.podInfo(pod("a")), "n1")
    const s2 = cache.snapshot()
    expect(s2.get("n1")!.pods).toHaveLength(1)
    cache.assume(Snapshot.podInfo(pod("b")), "n2")
    const s3 = cache.snapshot()
    expect(s3.get("n2")!.pods).toHaveLength(1)
    // Older snapshots, built or not, answer as of their own time.
    expect(s1.get("n1")!.pods).toHaveLength(0)
    expect(s2.get("n2")!.pods).toHaveLength(0)
    expect(s2.get("n1")!.pods).toHaveLength(1)
    // A node leaving is seen by the next snapshot only.
    cache.removeNode(node("n3"))
    expect(s3.get("n3")).toBeDefined()
    const s4 = cache.snapshot()
    expect(s4.get("n3")).toBeUndefined()
    expect(s4.nodes).toHaveLength(9)
    expect(s3.nodes).toHaveLength(10)
    // Many snapshots nobody lists: each still lists (and finds) what it saw.
    const seen: Array<Snapshot.Snapshot> = []
    for (let i = 0; i < 30; i++) {
      cache.assume(Snapshot.podInfo(pod(`c${i}`)), `n${i % 3 === 0 ? 4 : 5}`)
      seen.push(cache.snapshot())
    }
    expect(seen[29]!.get("n4")!.pods.length + seen[29]!.get("n5")!.pods.length).toBe(30)
    expect(seen[0]!.get("n4")!.pods).toHaveLength(1)
    expect(seen[0]!.nodes.find((n) => n.name === "n5")!.pods).toHaveLength(0)
    expect(seen[29]!.nodes.find((n) => n.name === "n5")!.pods).toHaveLength(20)
  })
})
