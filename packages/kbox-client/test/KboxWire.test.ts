import { Runtime } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"
import * as KboxWire from "../src/KboxWire.js"

describe("KboxWire errors", () => {
  it.each([
    [new Runtime.NotFound({ kind: "container", id: "c1", message: "container c1 not found" }), 404],
    [new Runtime.AlreadyExists({ kind: "sandbox", id: "s1", message: "pod has s1" }), 409],
    [new Runtime.Invalid({ message: "command: required" }), 400],
    [new Runtime.Unavailable({ message: "spawn failed" }), 503],
    [new Runtime.Unsupported({ message: "no pod network namespace" }), 501]
  ] as const)("%s survives the wire with status %i", (error, status) => {
    const encoded = KboxWire.encodeError(error)
    expect(encoded.status).toBe(status)
    const decoded = KboxWire.decodeError(encoded.status, JSON.stringify(encoded.body))
    expect(decoded).toEqual(error)
  })

  it.each([
    [500, "<html>oops</html>"],
    [502, ""],
    [404, '{"error": {"code": "Teapot", "message": "short and stout"}}']
  ])("an answer %i the contract does not know is Unavailable", (status, text) => {
    expect(KboxWire.decodeError(status, text)._tag).toBe("RuntimeUnavailable")
  })
})

describe("KboxWire queries", () => {
  it("encodes label filters as repeated label=KEY=VALUE and reads them back (values may hold =)", () => {
    const q = KboxWire.containerQuery({ sandboxId: "s1", state: "running", labels: { "fleet.koder.dev/pod-uid": "u=1", app: "web" } })
    const params = new URLSearchParams(q.slice(1))
    expect(params.get("sandboxId")).toBe("s1")
    expect(params.get("state")).toBe("running")
    expect(KboxWire.decodeLabels(params)).toEqual({ "fleet.koder.dev/pod-uid": "u=1", app: "web" })
    expect(KboxWire.containerQuery(undefined)).toBe("")
  })

  it.each([
    [{ follow: true, tailLines: 5 }, { follow: true, timestamps: false, tailLines: 5 }],
    [{ sinceSeconds: 30, timestamps: true }, { follow: false, timestamps: true, sinceSeconds: 30 }],
    [{}, { follow: false, timestamps: false }]
  ])("logs options %j round-trip", (options, expected) => {
    const q = KboxWire.logsQuery(options)
    expect(KboxWire.decodeLogsQuery(new URLSearchParams(q.replace(/^\?/, "")))).toEqual(expected)
  })

  it("rejects a negative or non-numeric tailLines with a message", () => {
    expect(KboxWire.decodeLogsQuery(new URLSearchParams("tailLines=-1"))).toMatch(/tailLines/)
    expect(KboxWire.decodeLogsQuery(new URLSearchParams("sinceSeconds=abc"))).toMatch(/sinceSeconds/)
  })
})
