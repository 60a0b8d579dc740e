import { describe, expect, it } from "vitest"
import type * as Framework from "../../src/scheduler/Framework.js"
import { CycleState, status, success } from "../../src/scheduler/Framework.js"
import * as Schedule from "../../src/scheduler/Schedule.js"
import * as Snapshot from "../../src/scheduler/Snapshot.js"

// ── Fixtures: nodes described by labels, tiny fake plugins reading them ──

const node = (name: string, labels: Record<string, string> = {}, cpu = "4") =>
  Snapshot.nodeInfo({ metadata: { name, labels }, spec: {}, status: { allocatable: { cpu, memory: "8Gi", pods: "110" } } })

const pod = (cpu = "1", status: Record<string, unknown> = {}) =>
  Snapshot.podInfo({ metadata: { name: "p", namespace: "default", uid: "u-p" }, spec: { containers: [{ name: "c", resources: { requests: { cpu } } }] }, status })

const snapshotOf = (...nodes: ReadonlyArray<Snapshot.NodeInfo>) => Snapshot.make(nodes)

const framework = (parts: Partial<Omit<Framework.Framework, "profile">> & { percentageOfNodesToScore?: number } = {}): Framework.Framework => ({
  profile: { schedulerName: "test", ...(parts.percentageOfNodesToScore === undefined ? {} : { percentageOfNodesToScore: parts.percentageOfNodesToScore }) },
  queueSort: undefined,
  preFilter: parts.preFilter ?? [],
  filter: parts.filter ?? [],
  postFilter: parts.postFilter ?? [],
  preScore: parts.preScore ?? [],
  score: parts.score ?? [],
  reserve: [],
  permit: [],
  bind: []
})

const insufficientCpu = status("Unschedulable", "Insufficient cpu")
/** NodeResourcesFit in miniature. */
const fit: Framework.FilterPlugin = {
  name: "Fit",
  filter: (_s, p, n) => (n.requested.milliCpu + p.requests.milliCpu > n.allocatable.milliCpu ? insufficientCpu : success)
}
/** Rejects nodes labelled `taint=<value>` as TaintToleration words it. */
const taint: Framework.FilterPlugin = {
  name: "Taint",
  filter: (_s, _p, n) =>
    n.labels["taint"] === undefined ? success : status("UnschedulableAndUnresolvable", `node(s) had untolerated taint {dedicated: ${n.labels["taint"]}}`)
}
/** Rejects nodes labelled `bad`, with two reasons at once. */
const twoReasons: Framework.FilterPlugin = {
  name: "Two",
  filter: (_s, _p, n) => (n.labels["bad"] === undefined ? success : status("Unschedulable", "Insufficient cpu", "Insufficient memory"))
}
/** Records which nodes it saw, in order. */
const recorder = () => {
  const seen: Array<string> = []
  const plugin: Framework.FilterPlugin = {
    name: "Recorder",
    filter: (_s, _p, n) => {
      seen.push(n.name)
      return success
    }
  }
  return { seen, plugin }
}
/** Narrows to the given nodes (as NodeName does). */
const narrow = (name: string, nodes: ReadonlyArray<string>): Framework.PreFilterPlugin => ({
  name,
  preFilter: () => ({ status: success, nodeNames: new Set(nodes) })
})
/** Scores by the node's `score` label. */
const byLabel = (name = "ByLabel", label = "score"): Framework.ScorePlugin => ({ name, score: (_s, _p, n) => Number(n.labels[label] ?? 0) })
/** Scores by label, then rescales so the best node gets 100 (as most upstream normalisers do). */
const normalised = (name = "Normalised", label = "raw"): Framework.ScorePlugin => ({
  name,
  score: (_s, _p, n) => Number(n.labels[label] ?? 0),
  normalize: (_s, _p, scores) => {
    const max = Math.max(...scores.map((s) => s.score))
    for (const s of scores) s.score = max === 0 ? 0 : Math.floor((s.score * 100) / max)
  }
})

const run = (fw: Framework.Framework, snap: Snapshot.Snapshot, options: Schedule.Options = {}, p = pod()) => Schedule.schedule(fw, new CycleState(), p, snap, options)

const scheduled = (d: Schedule.Decision) => {
  if (d._tag !== "Scheduled") throw new Error(`expected Scheduled, got ${JSON.stringify(d)}`)
  return d
}
const unschedulable = (d: Schedule.Decision) => {
  if (d._tag !== "Unschedulable") throw new Error(`expected Unschedulable, got ${JSON.stringify(d)}`)
  return d
}

const many = (count: number, labels: (i: number) => Record<string, string> = () => ({})) => Array.from({ length: count }, (_, i) => node(`n${i}`, labels(i)))

// ── Tests ──

describe("Schedule.numFeasibleNodesToFind", () => {
  // [percentage, nodes, expected]
  const cases: ReadonlyArray<[number | undefined, number, number]> = [
    [undefined, 0, 0],
    [undefined, 50, 50],
    [undefined, 99, 99],
    [undefined, 100, 100], // 50% of 100 is under the floor of 100
    [undefined, 1000, 420], // 50 - 1000/125 = 42%
    [undefined, 5000, 500], // 10%
    [undefined, 6000, 300], // 2% → floor 5%
    [undefined, 20000, 1000],
    [0, 1000, 420],
    [30, 1000, 300],
    [100, 1000, 1000],
    [1, 1000, 100],
    [150, 1000, 1000]
  ]
  it.each(cases)("percentage %s of %i nodes → %i", (pct, nodes, want) => {
    expect(Schedule.numFeasibleNodesToFind(pct, nodes)).toBe(want)
  })
})

describe("Schedule.fitErrorMessage", () => {
  const st = (code: Framework.Code, ...reasons: Array<string>): Framework.Status => ({ code, reasons })
  // [what, numAllNodes, statuses, pre/post messages, expected]
  const cases: ReadonlyArray<[string, number, ReadonlyArray<Framework.Status>, { preFilter?: string; postFilter?: string }, string]> = [
    [
      "reasons counted across nodes, sorted as strings",
      5,
      [...Array(3).fill(st("Unschedulable", "Insufficient cpu")), ...Array(2).fill(st("UnschedulableAndUnresolvable", "node(s) had untolerated taint {dedicated: gpu}"))],
      {},
      "0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu."
    ],
    [
      "every reason of a node counts",
      2,
      [st("Unschedulable", "Insufficient cpu", "Insufficient memory"), st("Unschedulable", "Insufficient memory")],
      {},
      "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."
    ],
    [
      "string order, not numeric: 10 before 9",
      19,
      [...Array(10).fill(st("Unschedulable", "b")), ...Array(9).fill(st("Unschedulable", "a"))],
      {},
      "0/19 nodes are available: 10 b, 9 a."
    ],
    [
      "PreFilter's message replaces the histogram",
      3,
      Array(3).fill(st("UnschedulableAndUnresolvable", "persistentvolumeclaim \"data\" not found")),
      { preFilter: 'persistentvolumeclaim "data" not found' },
      '0/3 nodes are available: persistentvolumeclaim "data" not found.'
    ],
    [
      "PostFilter's message is appended as it is",
      3,
      Array(3).fill(st("Unschedulable", "Insufficient cpu")),
      { postFilter: "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod." },
      "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    ],
    ["no reasons at all", 2, [success, success], {}, "0/2 nodes are available:"]
  ]
  it.each(cases)("%s", (_what, n, statuses, messages, want) => {
    expect(Schedule.fitErrorMessage(n, statuses, messages)).toBe(want)
  })
})

describe("Schedule.schedule: filtering", () => {
  it("rejects nodes with reasons and the kube-scheduler message", () => {
    const snap = snapshotOf(
      node("busy1", {}, "500m"),
      node("busy2", {}, "500m"),
      node("busy3", {}, "500m"),
      node("gpu1", { taint: "gpu" }),
      node("gpu2", { taint: "gpu" })
    )
    const d = unschedulable(run(framework({ filter: [taint, fit] }), snap))
    expect(d.message).toBe("0/5 nodes are available: 2 node(s) had untolerated taint {dedicated: gpu}, 3 Insufficient cpu.")
    expect(d.statuses.get("busy1")).toEqual({ code: "Unschedulable", reasons: ["Insufficient cpu"], plugin: "Fit" })
    expect(d.statuses.get("gpu2")?.plugin).toBe("Taint")
    expect([...d.unschedulablePlugins].sort()).toEqual(["Fit", "Taint"])
    expect(d.postFilter).toBeUndefined()
  })

  it("stops at the first failing filter of a node", () => {
    const { seen, plugin } = recorder()
    const d = unschedulable(run(framework({ filter: [taint, plugin] }), snapshotOf(node("a", { taint: "x" }), node("b", { taint: "y" }))))
    expect(seen).toEqual([])
    expect(d.message).toBe("0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: x}, 1 node(s) had untolerated taint {dedicated: y}.")
  })

  it("schedules on a feasible node and reports the others", () => {
    const d = scheduled(run(framework({ filter: [fit], score: [{ plugin: byLabel(), weight: 1 }] }), snapshotOf(node("small", {}, "500m"), node("big1"), node("big2", { score: "5" }))))
    expect(d.node).toBe("big2")
    expect(d.feasible).toBe(2)
    expect(d.evaluated).toBe(3)
    expect(d.statuses.get("small")?.reasons).toEqual(["Insufficient cpu"])
  })

  it("has no node to offer when the cluster has none", () => {
    const d = unschedulable(run(framework({ filter: [fit] }), snapshotOf()))
    expect(d.message).toBe("no nodes available to schedule pods")
  })
})

describe("Schedule.schedule: PreFilter", () => {
  it("narrows the nodes Filter sees; the others count as not satisfying the plugin", () => {
    const { seen, plugin } = recorder()
    const snap = snapshotOf(node("n1", {}, "500m"), node("n2"), node("n3"))
    const ok = scheduled(run(framework({ preFilter: [narrow("NodeName", ["n2", "ghost"])], filter: [plugin, fit] }), snap))
    expect(ok.node).toBe("n2")
    expect(seen).toEqual(["n2"])
    const d = unschedulable(run(framework({ preFilter: [narrow("NodeName", ["n1"])], filter: [fit] }), snap))
    expect(d.message).toBe("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeName].")
    expect(d.statuses.size).toBe(3)
    expect(d.unschedulablePlugins).toEqual(new Set(["NodeName", "Fit"]))
  })

  it("intersects narrowings; an empty intersection rules every node out", () => {
    const { seen, plugin } = recorder()
    const snap = snapshotOf(node("n1"), node("n2"), node("n3"))
    scheduled(run(framework({ preFilter: [narrow("A", ["n1", "n2"]), narrow("B", ["n2", "n3"])], filter: [plugin] }), snap))
    expect(seen).toEqual(["n2"])
    const one = unschedulable(run(framework({ preFilter: [narrow("A", [])] }), snap))
    expect(one.message).toBe("0/3 nodes are available: node(s) didn't satisfy plugin A.")
    const two = unschedulable(run(framework({ preFilter: [narrow("A", ["n1"]), narrow("B", ["n3"])] }), snap))
    expect(two.message).toBe("0/3 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously.")
    expect(two.statuses.get("n2")?.code).toBe("UnschedulableAndUnresolvable")
    expect(two.unschedulablePlugins).toEqual(new Set(["A", "B"]))
  })

  it("Skip keeps the plugin's Filter from running", () => {
    let calls = 0
    const both: Framework.PreFilterPlugin & Framework.FilterPlugin = {
      name: "Both",
      preFilter: () => ({ status: status("Skip") }),
      filter: () => {
        calls++
        return success
      }
    }
    const state = new CycleState()
    scheduled(Schedule.schedule(framework({ preFilter: [both], filter: [both] }), state, pod(), snapshotOf(node("n1"))))
    expect(calls).toBe(0)
    expect(state.skipFilter.has("Both")).toBe(true)
  })

  // [what, first PreFilter's code, does the second run]
  const rejections: ReadonlyArray<[string, Framework.Code, boolean]> = [
    ["Unschedulable: the rest still run (preemption may use them)", "Unschedulable", true],
    ["UnschedulableAndUnresolvable: the rest are skipped", "UnschedulableAndUnresolvable", false]
  ]
  it.each(rejections)("%s", (_what, code, secondRuns) => {
    let second = 0
    const d = unschedulable(
      run(
        framework({
          preFilter: [
            { name: "First", preFilter: () => ({ status: status(code, "pod has unbound immediate PersistentVolumeClaims") }) },
            { name: "Second", preFilter: () => ((second++, { status: success })) }
          ],
          filter: [fit]
        }),
        snapshotOf(node("n1"), node("n2"))
      )
    )
    expect(second).toBe(secondRuns ? 1 : 0)
    expect(d.message).toBe("0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    expect(d.statuses.get("n2")).toEqual({ code, reasons: ["pod has unbound immediate PersistentVolumeClaims"], plugin: "First" })
    expect(d.unschedulablePlugins).toEqual(new Set(["First"]))
  })

  it("an Error from PreFilter is an Error decision", () => {
    const d = run(framework({ preFilter: [{ name: "Broken", preFilter: () => ({ status: status("Error", "boom") }) }] }), snapshotOf(node("n1")))
    expect(d).toMatchObject({ _tag: "Error", message: 'running PreFilter plugin "Broken": boom' })
  })
})

describe("Schedule.schedule: sampling", () => {
  it("stops after numFeasibleNodesToFind feasible nodes and still picks a feasible one", () => {
    const { seen, plugin } = recorder()
    // Every other node is too small: 1,000 nodes, adaptive 42% → 420 feasible to find.
    const snap = snapshotOf(...Array.from({ length: 1000 }, (_, i) => node(`n${i}`, { score: String(i % 97) }, i % 2 === 0 ? "4" : "500m")))
    const d = scheduled(run(framework({ filter: [plugin, fit], score: [{ plugin: byLabel(), weight: 1 }] }), snap))
    expect(d.feasible).toBe(420)
    expect(d.evaluated).toBe(seen.length)
    expect(seen.length).toBe(839)
    expect(d.scores?.nodes.length).toBe(420)
    const chosen = snap.get(d.node)!
    expect(fit.filter(new CycleState(), pod(), chosen)).toEqual(success)
    // The best of what was evaluated: no scored node beats it.
    expect(Math.max(...d.scores!.totals)).toBe(Number(chosen.labels["score"]))
  })

  it("takes the percentage from options, and the profile's over it", () => {
    const snap = snapshotOf(...many(1000))
    const score = [{ plugin: byLabel(), weight: 1 }]
    expect(scheduled(run(framework({ score }), snap, { percentageOfNodesToScore: 30 })).feasible).toBe(300)
    expect(scheduled(run(framework({ score, percentageOfNodesToScore: 60 }), snap, { percentageOfNodesToScore: 30 })).feasible).toBe(600)
    expect(scheduled(run(framework({ score }), snap, { percentageOfNodesToScore: 100 })).feasible).toBe(1000)
  })

  it("without Score plugins, the first feasible node will do", () => {
    const { seen, plugin } = recorder()
    const d = scheduled(run(framework({ filter: [fit, plugin] }), snapshotOf(node("small", {}, "100m"), node("a"), node("b"))))
    expect(d.node).toBe("a")
    expect(seen).toEqual(["a"])
    expect(d.evaluated).toBe(2)
  })

  it("rotates the start index across cycles, wrapping around", () => {
    const snap = snapshotOf(...many(200))
    const score = [{ plugin: byLabel(), weight: 1 }]
    // 200 nodes: 48% is 96, under the floor: 100 per cycle.
    const first = recorder()
    const d1 = scheduled(run(framework({ filter: [first.plugin], score }), snap))
    expect(first.seen[0]).toBe("n0")
    expect(first.seen.length).toBe(100)
    expect(d1.nextStartIndex).toBe(100)
    const second = recorder()
    const d2 = scheduled(run(framework({ filter: [second.plugin], score }), snap, { startIndex: d1.nextStartIndex }))
    expect(second.seen[0]).toBe("n100")
    expect(second.seen.at(-1)).toBe("n199")
    expect(d2.nextStartIndex).toBe(0)
    const third = recorder()
    const d3 = scheduled(run(framework({ filter: [third.plugin], score }), snap, { startIndex: 150 }))
    expect(third.seen.slice(48, 52)).toEqual(["n198", "n199", "n0", "n1"])
    expect(d3.nextStartIndex).toBe(50)
  })
})

describe("Schedule.schedule: scoring", () => {
  it("weights normalised scores and sums them", () => {
    // ByLabel (weight 1) prefers c; Normalised (weight 3) prefers a after rescaling 0–100.
    const snap = snapshotOf(node("a", { score: "10", raw: "40" }), node("b", { score: "50", raw: "20" }), node("c", { score: "90", raw: "10" }))
    const d = scheduled(run(framework({ score: [{ plugin: byLabel(), weight: 1 }, { plugin: normalised(), weight: 3 }] }), snap))
    // a: 10 + 3×100 = 310; b: 50 + 3×50 = 200; c: 90 + 3×25 = 165
    expect(d.node).toBe("a")
    expect(d.scores?.plugins).toEqual([
      { name: "ByLabel", weight: 1 },
      { name: "Normalised", weight: 3 }
    ])
    expect([...d.scores!.values]).toEqual([10, 100, 50, 50, 90, 25])
    expect([...d.scores!.totals]).toEqual([310, 200, 165])
    // With the weights swapped, c wins.
    const swapped = scheduled(run(framework({ score: [{ plugin: byLabel(), weight: 10 }, { plugin: normalised(), weight: 1 }] }), snap))
    expect(swapped.node).toBe("c")
  })

  it("does not score a single feasible node", () => {
    let scored = 0
    const counting: Framework.ScorePlugin = { name: "Counting", score: () => (scored++, 0) }
    const d = scheduled(run(framework({ filter: [fit], score: [{ plugin: counting, weight: 1 }] }), snapshotOf(node("tiny", {}, "1m"), node("only"))))
    expect(d).toMatchObject({ node: "only", feasible: 1, evaluated: 2, scores: undefined })
    expect(scored).toBe(0)
  })

  it("PreScore Skip keeps the plugin's Score from running", () => {
    let scored = 0
    const plugin: Framework.PreScorePlugin & Framework.ScorePlugin = {
      name: "Skippy",
      preScore: () => status("Skip"),
      score: () => (scored++, 100)
    }
    const d = scheduled(run(framework({ preScore: [plugin], score: [{ plugin, weight: 1 }, { plugin: byLabel(), weight: 1 }] }), snapshotOf(node("a"), node("b", { score: "1" }))))
    expect(scored).toBe(0)
    expect(d.node).toBe("b")
    expect(d.scores?.plugins.map((p) => p.name)).toEqual(["ByLabel"])
  })

  // [what, framework parts, expected message]
  const errors: ReadonlyArray<[string, Partial<Framework.Framework>, string]> = [
    ["a score out of range after normalising", { score: [{ plugin: byLabel(), weight: 1 }] }, 'plugin "ByLabel" returns an invalid score 101, it should in the range of [0, 100] after normalizing'],
    ["a Filter error", { filter: [{ name: "Boom", filter: () => status("Error", "disk on fire") }] }, 'running "Boom" filter plugin: disk on fire'],
    ["a PreScore error", { preScore: [{ name: "Pre", preScore: () => status("Error", "no") }], score: [{ plugin: byLabel(), weight: 1 }] }, 'running PreScore plugin "Pre": no'],
    [
      "a plugin that throws",
      {
        filter: [
          {
            name: "Thrower",
            filter: () => {
              throw new Error("bug")
            }
          }
        ]
      },
      "internal error: bug"
    ]
  ]
  it.each(errors)("%s is an Error decision", (_what, parts, message) => {
    const d = run(framework(parts), snapshotOf(node("a", { score: "101" }), node("b", { score: "3" })), { startIndex: 1 })
    expect(d).toEqual({ _tag: "Error", message, nextStartIndex: expect.any(Number) })
  })
})

describe("Schedule.schedule: ties", () => {
  const snap = snapshotOf(node("a", { score: "5" }), node("b", { score: "9" }), node("c", { score: "9" }), node("d", { score: "9" }))
  const fw = framework({ score: [{ plugin: byLabel(), weight: 1 }] })

  it("without random, the first best in evaluation order wins", () => {
    expect(scheduled(run(fw, snap)).node).toBe("b")
    expect(scheduled(run(fw, snap, { startIndex: 3 })).node).toBe("d")
  })

  // [random's constant value, winner]: a tie replaces the candidate when floor(random × ties) is 0.
  const fixed: ReadonlyArray<[number, string]> = [
    [0, "d"],
    [0.4, "c"], // c: floor(0.4×2) = 0 → c; d: floor(0.4×3) = 1 → keep c
    [0.99, "b"]
  ]
  it.each(fixed)("with random() = %s the winner is %s", (r, want) => {
    expect(scheduled(run(fw, snap, { random: () => r })).node).toBe(want)
  })

  it("is uniform among the best nodes (reservoir sampling) and never picks a worse one", () => {
    let seed = 42
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
    const counts: Record<string, number> = {}
    for (let i = 0; i < 3000; i++) {
      const n = scheduled(run(fw, snap, { random })).node
      counts[n] = (counts[n] ?? 0) + 1
    }
    expect(counts["a"]).toBeUndefined()
    for (const n of ["b", "c", "d"]) expect(counts[n]).toBeGreaterThan(850)
  })
})

describe("Schedule.schedule: nominated node", () => {
  it("is tried first and taken without scoring when it fits", () => {
    const { seen, plugin } = recorder()
    const d = scheduled(run(framework({ filter: [plugin, fit], score: [{ plugin: byLabel(), weight: 1 }] }), snapshotOf(node("a", { score: "9" }), node("b")), {}, pod("1", { nominatedNodeName: "b" })))
    expect(d).toMatchObject({ node: "b", evaluated: 1, feasible: 1 })
    expect(seen).toEqual(["b"])
  })

  it("falls back to every node when it does not fit", () => {
    const d = scheduled(run(framework({ filter: [fit], score: [{ plugin: byLabel(), weight: 1 }] }), snapshotOf(node("a"), node("b", {}, "1m"), node("c", { score: "1" })), {}, pod("1", { nominatedNodeName: "b" })))
    expect(d.node).toBe("c")
    expect(d.statuses.get("b")?.reasons).toEqual(["Insufficient cpu"])
  })
})

describe("Schedule.schedule: PostFilter", () => {
  const victim = Snapshot.podInfo({ metadata: { name: "low", namespace: "batch", uid: "u-low" }, spec: { containers: [] } })
  const preemption = (calls: { n: number; saw?: ReadonlyMap<string, Framework.Status> }, result: Framework.PostFilterResult): Framework.PostFilterPlugin => ({
    name: "DefaultPreemption",
    postFilter: (_s, _p, _snap, filtered) => {
      calls.n++
      calls.saw = filtered
      return result
    }
  })

  it("runs only when no node fits", () => {
    const calls: { n: number; saw?: ReadonlyMap<string, Framework.Status> } = { n: 0 }
    const fw = framework({ filter: [fit], postFilter: [preemption(calls, { status: success, nominatedNode: "a" })] })
    scheduled(run(fw, snapshotOf(node("a"), node("b"))))
    expect(calls.n).toBe(0)
    const d = unschedulable(run(fw, snapshotOf(node("a"), node("b")), {}, pod("8")))
    expect(calls.n).toBe(1)
    expect(calls.saw?.size).toBe(2)
    expect(d.postFilter).toEqual({ status: { code: "Success", reasons: [], plugin: "DefaultPreemption" }, nominatedNode: "a" })
    // A successful PostFilter adds nothing to the message.
    expect(d.message).toBe("0/2 nodes are available: 2 Insufficient cpu.")
  })

  it("carries the victims and nominated node, and appends a failing PostFilter's message", () => {
    const nominate = unschedulable(
      run(framework({ filter: [fit], postFilter: [preemption({ n: 0 }, { status: success, nominatedNode: "a", victims: [victim] })] }), snapshotOf(node("a")), {}, pod("8"))
    )
    expect(nominate.postFilter?.victims).toEqual([victim])
    expect(Schedule.explain(nominate)).toMatchObject({ nominatedNode: "a", victims: [{ namespace: "batch", name: "low" }] })

    const none = unschedulable(
      run(
        framework({
          filter: [fit],
          postFilter: [preemption({ n: 0 }, { status: status("Unschedulable", "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.") })]
        }),
        snapshotOf(node("a"), node("b")),
        {},
        pod("8")
      )
    )
    expect(none.message).toBe("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    expect(none.postFilter?.status.plugin).toBe("DefaultPreemption")
  })

  it("also runs after a PreFilter rejection", () => {
    const calls = { n: 0 }
    const d = unschedulable(
      run(
        framework({
          preFilter: [{ name: "Gate", preFilter: () => ({ status: status("Unschedulable", "waiting") }) }],
          postFilter: [preemption(calls, { status: status("Unschedulable", "preemption: not eligible") })]
        }),
        snapshotOf(node("a"))
      )
    )
    expect(calls.n).toBe(1)
    expect(d.message).toBe("0/1 nodes are available: waiting. preemption: not eligible")
  })
})

describe("Schedule.explain", () => {
  it("lists the selected node, the other scored nodes best first, then the rejected", () => {
    const snap = snapshotOf(node("z-small", {}, "1m"), node("a", { score: "1" }), node("b", { score: "7" }), node("c", { score: "3" }), node("gpu", { taint: "gpu" }))
    const d = run(framework({ filter: [taint, fit], score: [{ plugin: byLabel(), weight: 2 }] }), snap)
    const e = Schedule.explain(d)
    expect(JSON.parse(JSON.stringify(e))).toEqual({
      result: "Scheduled",
      node: "b",
      evaluatedNodes: 5,
      feasibleNodes: 3,
      nodes: [
        { node: "b", verdict: "Selected", total: 14, scores: { ByLabel: { score: 7, weight: 2 } } },
        { node: "c", verdict: "Feasible", total: 6, scores: { ByLabel: { score: 3, weight: 2 } } },
        { node: "a", verdict: "Feasible", total: 2, scores: { ByLabel: { score: 1, weight: 2 } } },
        { node: "gpu", verdict: "UnschedulableAndUnresolvable", plugin: "Taint", reasons: ["node(s) had untolerated taint {dedicated: gpu}"] },
        { node: "z-small", verdict: "Unschedulable", plugin: "Fit", reasons: ["Insufficient cpu"] }
      ]
    })
  })

  it("explains an unschedulable pod node by node", () => {
    const d = run(framework({ filter: [twoReasons] }), snapshotOf(node("b", { bad: "1" }), node("a", { bad: "1" })))
    expect(Schedule.explain(d)).toEqual({
      result: "Unschedulable",
      message: "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory.",
      nodes: [
        { node: "a", verdict: "Unschedulable", plugin: "Two", reasons: ["Insufficient cpu", "Insufficient memory"] },
        { node: "b", verdict: "Unschedulable", plugin: "Two", reasons: ["Insufficient cpu", "Insufficient memory"] }
      ]
    })
  })

  it("explains an error and an unscored single choice", () => {
    expect(Schedule.explain({ _tag: "Error", message: "boom", nextStartIndex: 0 })).toEqual({ result: "Error", message: "boom", nodes: [] })
    const single = Schedule.explain(run(framework({ filter: [fit] }), snapshotOf(node("only"))))
    expect(single).toEqual({ result: "Scheduled", node: "only", evaluatedNodes: 1, feasibleNodes: 1, nodes: [{ node: "only", verdict: "Selected" }] })
  })
})
