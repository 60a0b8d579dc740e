import { describe, expect, it } from "vitest"
import { CycleState } from "../../../src/scheduler/Framework.js"
import * as NodePorts from "../../../src/scheduler/plugins/NodePorts.js"
import { manyNodes, node, pod, runFilter } from "./fixtures.js"

/** Container ports from `PROTOCOL/hostIP/hostPort` strings (empty parts are left out, as a user would). */
const ports = (...specs: ReadonlyArray<string>) =>
  specs.map((s, i) => {
    const [protocol, hostIP, hostPort] = s.split("/")
    return { containerPort: 1000 + i, hostPort: Number(hostPort), ...(protocol ? { protocol } : {}), ...(hostIP ? { hostIP } : {}) }
  })

const podWith = (...specs: ReadonlyArray<string>) => pod({ spec: { containers: [{ name: "c", image: "app", ports: ports(...specs) }] } })
const nodeWith = (...specs: ReadonlyArray<string>) => node({ name: "n" }, specs.length === 0 ? [] : [podWith(...specs)])

describe("NodePorts", () => {
  const plugin = NodePorts.make()

  it.each([
    { case: "nothing in use", want: ["UDP/127.0.0.1/8080"], used: [], fits: true },
    { case: "another port", want: ["UDP/127.0.0.1/8080"], used: ["UDP/127.0.0.1/9090"], fits: true },
    { case: "the same UDP port", want: ["UDP/127.0.0.1/8080"], used: ["UDP/127.0.0.1/8080"], fits: false },
    { case: "the same TCP port", want: ["TCP/127.0.0.1/8080"], used: ["TCP/127.0.0.1/8080"], fits: false },
    { case: "another host IP", want: ["TCP/127.0.0.1/8080"], used: ["TCP/127.0.0.2/8080"], fits: true },
    { case: "another protocol", want: ["UDP/127.0.0.1/8080"], used: ["TCP/127.0.0.1/8080"], fits: true },
    { case: "the second wanted port is taken", want: ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], used: ["UDP/127.0.0.1/8080"], fits: false },
    { case: "wanted 0.0.0.0 against a specific IP", want: ["TCP/0.0.0.0/8001"], used: ["TCP/127.0.0.1/8001"], fits: false },
    { case: "wanted specific IP against 0.0.0.0 in use", want: ["TCP/10.0.10.10/8001"], used: ["TCP/0.0.0.0/8001"], fits: false },
    { case: "0.0.0.0 on both sides", want: ["TCP/0.0.0.0/8001"], used: ["TCP/0.0.0.0/8001"], fits: false },
    { case: "0.0.0.0 in use on another protocol", want: ["UDP/127.0.0.1/8001"], used: ["TCP/0.0.0.0/8001"], fits: true },
    { case: "wanted 0.0.0.0, another protocol on a specific IP", want: ["UDP/0.0.0.0/8001"], used: ["TCP/127.0.0.1/8001"], fits: true },
    { case: "wanted 0.0.0.0, a port with the same digits at the end", want: ["TCP/0.0.0.0/80"], used: ["TCP/127.0.0.1/8080", "TCP/127.0.0.1/180"], fits: true },
    { case: "empty hostIP means 0.0.0.0", want: ["TCP//8001"], used: ["TCP/127.0.0.1/8001"], fits: false },
    { case: "empty protocol means TCP", want: ["/127.0.0.1/8001"], used: ["TCP/127.0.0.1/8001"], fits: false },
    { case: "IPv6 host IPs", want: ["TCP/::1/8001"], used: ["TCP/::2/8001"], fits: true }
  ])("$case", ({ want, used, fits }) => {
    const n = nodeWith(...used)
    const p = podWith(...want)
    const verdicts = [runFilter(plugin, p, [n]).verdicts.get("n")!, plugin.filter(new CycleState(), p, n)]
    for (const v of verdicts) {
      if (fits) expect(v.code).toBe("Success")
      else expect(v).toMatchObject({ code: "Unschedulable", reasons: ["node(s) didn't have free ports for the requested pod ports"] })
    }
  })

  it("PreFilter skips a pod without host ports (hostPort 0 or unset is not a host port)", () => {
    const p = pod({ spec: { containers: [{ name: "c", image: "app", ports: [{ containerPort: 80 }, { containerPort: 81, hostPort: 0 }] }] } })
    expect(runFilter(plugin, p, [nodeWith("TCP/0.0.0.0/80")]).preFilter?.status.code).toBe("Skip")
  })

  it("counts sidecar init containers' ports, not other init containers'", () => {
    const spec = (restartPolicy?: string) => ({
      initContainers: [{ name: "i", image: "x", ...(restartPolicy ? { restartPolicy } : {}), ports: ports("TCP/0.0.0.0/9000") }]
    })
    expect(NodePorts.hostPortsOf(pod({ spec: spec("Always") })).map((w) => w.key)).toEqual(["TCP/0.0.0.0/9000"])
    expect(NodePorts.hostPortsOf(pod({ spec: spec() }))).toEqual([])
  })

  it("filters 5,000 nodes", () => {
    const all = manyNodes(5000, (i) => node({ name: `node-${i}` }, i % 2 === 0 ? [podWith("TCP/0.0.0.0/80", "TCP/10.0.0.1/443", "UDP/0.0.0.0/53")] : []))
    const { verdicts } = runFilter(plugin, podWith("TCP/0.0.0.0/443"), all)
    expect([...verdicts.values()].filter((v) => v.code === "Success")).toHaveLength(2500)
  })
})
