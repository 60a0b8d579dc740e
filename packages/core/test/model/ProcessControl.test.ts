import { describe, expect, it } from "@effect/vitest"
import * as ProcessControl from "../../src/model/ProcessControl.js"

const pc = (spec?: Record<string, unknown>) => ({ apiVersion: "fleet.koder.dev/v1", kind: "ProcessControl", metadata: { name: "c", namespace: "d" }, ...(spec === undefined ? {} : { spec }) })

describe("ProcessControl.permits", () => {
  const web = { app: "web" }
  it.each([
    ["no consent at all", [], web, { _tag: "exec" }, false],
    ["an empty spec consents to everything", [pc()], web, { _tag: "exec" }, true],
    ["an empty spec, signal", [pc()], web, { _tag: "signal", signal: "SIGKILL" }, true],
    ["exec switched off", [pc({ exec: false })], web, { _tag: "exec" }, false],
    ["signal switched off", [pc({ signal: false })], web, { _tag: "signal", signal: "SIGHUP" }, false],
    ["a listed signal", [pc({ signals: ["SIGHUP"] })], web, { _tag: "signal", signal: "SIGHUP" }, true],
    ["an unlisted signal", [pc({ signals: ["SIGHUP"] })], web, { _tag: "signal", signal: "SIGTERM" }, false],
    ["a selector that matches", [pc({ podSelector: { matchLabels: web } })], web, { _tag: "exec" }, true],
    ["a selector that does not", [pc({ podSelector: { matchLabels: { app: "db" } } })], web, { _tag: "exec" }, false],
    ["one of several consents", [pc({ exec: false }), pc({ podSelector: { matchLabels: web } })], web, { _tag: "exec" }, true],
    ["an undecodable object never consents", [{ kind: "ProcessControl", spec: { exec: "yes" } }], web, { _tag: "exec" }, false]
  ] as const)("%s", (_name, consents, labels, action, want) => {
    expect(ProcessControl.permits(consents, labels, action)).toBe(want)
  })

  it("refuses unknown signal names", () => {
    expect(ProcessControl.validate({ ...pc({ signals: ["SIGHUP", "SIGFOO"] }) } as ProcessControl.ProcessControl).map((e) => e.path)).toEqual(["spec.signals[1]"])
  })
})
