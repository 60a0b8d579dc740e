/** Node IPAM: a block of the cluster CIDR per Node, none twice, kept, freed with the Node. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type * as Client from "../../src/client/Client.js"
import * as NodeIpam from "../../src/controllers/NodeIpam.js"
import * as PodCidr from "../../src/network/PodCidr.js"
import * as TestCluster from "../../src/testing/TestCluster.js"

const plan = Either.getOrThrow(PodCidr.plan("10.42.0.0/22"))
const node = (name: string, cidr?: string) => ({ metadata: { name }, spec: cidr === undefined ? {} : { podCIDR: cidr, podCIDRs: [cidr] } })

describe("NodeIpam.decide", () => {
  it("keeps a Node that has a block, gives the lowest free block to one that has none", () => {
    const nodes = [node("a", "10.42.0.0/24"), node("b", "10.42.2.0/24"), node("c")]
    expect(NodeIpam.decide(plan, nodes[0]!, nodes)).toEqual({ _tag: "Keep" })
    expect(NodeIpam.decide(plan, nodes[2]!, nodes)).toEqual({ _tag: "Assign", cidr: "10.42.1.0/24" })
  })

  it("reports a full cluster CIDR", () => {
    const nodes = [0, 1, 2, 3].map((i) => node(`n${i}`, `10.42.${i}.0/24`))
    expect(NodeIpam.decide(plan, node("late"), [...nodes, node("late")])).toEqual({ _tag: "Full" })
  })

  it("refuses a malformed cluster CIDR when built", () => {
    expect(() => NodeIpam.reconciler({ clusterCidr: "10.42.0.0" })).toThrow(/node IPAM/)
  })
})

const NodeRef: Client.ResourceRef = { apiVersion: "v1", kind: "Node" }
const cidrs = (c: TestCluster.TestCluster) =>
  Effect.map(c.client.list(NodeRef), (l) =>
    Object.fromEntries(((l["items"] as ReadonlyArray<Record<string, any>>) ?? []).map((n) => [n["metadata"]["name"] as string, n["spec"]?.["podCIDR"] as string | undefined]))
  )

describe("NodeIpam (integration)", () => {
  it.live(
    "assigns distinct blocks to every Node, keeps them, and reuses a deleted Node's block",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const c = yield* TestCluster.make({ nodes: 3, scheduler: false, controllers: [NodeIpam.reconciler({ clusterCidr: "10.42.0.0/22" })] })
          const first = yield* c.eventually(Effect.flatMap(cidrs(c), (m) => (Object.values(m).filter((v) => v !== undefined).length === 3 ? Effect.succeed(m) : Effect.fail(new Error(JSON.stringify(m))))))
          expect(new Set(Object.values(first))).toEqual(new Set(["10.42.0.0/24", "10.42.1.0/24", "10.42.2.0/24"]))
          const n = yield* c.client.get(NodeRef, undefined, c.nodeNames()[0]!)
          expect((n["spec"] as Record<string, unknown>)["podCIDRs"]).toEqual([first[c.nodeNames()[0]!]])
          // The API keeps it: a change is refused.
          const changed = yield* Effect.either(c.client.patch(NodeRef, undefined, c.nodeNames()[0]!, "merge", { spec: { podCIDR: "10.42.3.0/24" } }))
          expect(changed._tag).toBe("Left")
          // A deleted Node's block goes to the next Node; a fourth Node takes the last one.
          const gone = c.nodeNames()[1]!
          const freed = first[gone]!
          yield* c.removeNode(gone)
          yield* c.addNode({ name: "late-1" })
          yield* c.addNode({ name: "late-2" })
          const after = yield* c.eventually(Effect.flatMap(cidrs(c), (m) => (m["late-1"] !== undefined && m["late-2"] !== undefined ? Effect.succeed(m) : Effect.fail(new Error(JSON.stringify(m))))))
          expect(new Set([after["late-1"], after["late-2"]])).toEqual(new Set([freed, "10.42.3.0/24"]))
          expect(new Set(Object.values(after)).size).toBe(Object.keys(after).length)
        })
      ),
    30_000
  )
})
