import { describe, expect, it } from "@effect/vitest"
import { Nominator } from "../../../src/scheduler/queue/Nominator.js"
import { podInfo } from "./fixtures.js"

const nominatedTo = (node: string) => ({ nominatedNodeName: node })

describe("Nominator", () => {
  it("indexes nominations by pod and node; clearing forgets both", () => {
    const n = new Nominator()
    const a = podInfo("a")
    const b = podInfo("b")
    n.nominate(a, "n1")
    n.nominate(b, "n1")
    expect(n.nominated("n1").map((p) => p.name)).toEqual(["a", "b"])
    n.nominate(a, "n2")
    expect(n.nominated("n1").map((p) => p.name)).toEqual(["b"])
    expect(n.nodeOf("uid-a")).toBe("n2")
    n.nominate(a, undefined)
    n.remove("uid-b")
    expect([n.nominated("n1"), n.nominated("n2"), n.nodeOf("uid-a")]).toEqual([[], [], undefined])
  })

  it.each([
    { name: "the API's nomination wins", memory: "n1", previous: undefined, next: nominatedTo("n2"), node: "n2" },
    { name: "a version not showing a nomination made in memory keeps it", memory: "n1", previous: {}, next: {}, node: "n1" },
    { name: "a nomination the API cleared goes", memory: "n1", previous: nominatedTo("n1"), next: {}, node: undefined },
    { name: "no nomination anywhere", memory: undefined, previous: undefined, next: {}, node: undefined }
  ])("sync: $name", ({ memory, previous, next, node }) => {
    const n = new Nominator()
    if (memory !== undefined) n.nominate(podInfo("p"), memory)
    n.sync(podInfo("p", 0, next), previous === undefined ? undefined : podInfo("p", 0, previous))
    expect(n.nodeOf("uid-p")).toBe(node)
  })
})
