// The package boundaries of DESIGN §2 are enforced by lint; this proves the rules still bite.
import { ESLint } from "eslint"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const eslint = new ESLint({ cwd: root })

const violations = async (filePath: string, code: string) => {
  const [result] = await eslint.lintText(code, { filePath })
  return result!.messages.filter((m) => m.ruleId === "no-restricted-imports").length
}

describe("package boundaries", () => {
  it.each([
    ["packages/core/src/store/X.ts", 'import { readFileSync } from "node:fs"\nexport const x = readFileSync'],
    ["packages/core/src/store/X.ts", 'import Database from "better-sqlite3"\nexport const x = Database'],
    ["packages/core/src/store/X.ts", 'import pg from "pg"\nexport const x = pg'],
    ["packages/core/src/store/X.ts", 'import { NodeRuntime } from "@effect/platform-node"\nexport const x = NodeRuntime'],
    ["packages/daemon/src/X.ts", 'import { Store } from "@koder/fleet-core/src/store/Store.js"\nexport const x = Store'],
    ["packages/daemon/src/X.ts", 'import { x as y } from "@koder/fleet-store-sqlite/internal/db.js"\nexport const x = y'],
    ["packages/store-sqlite/src/X.ts", 'import { Store } from "../../core/src/index.js"\nexport const x = Store']
  ])("rejects %s importing across a boundary: %s", async (file, code) => {
    expect(await violations(file, code)).toBe(1)
  })

  it.each([
    ["packages/store-sqlite/src/X.ts", 'import Database from "better-sqlite3"\nimport { Store } from "@koder/fleet-core"\nexport const x = [Database, Store]'],
    ["packages/core/src/store/X.ts", 'import { Effect } from "effect"\nimport * as KeyOrder from "./KeyOrder.js"\nexport const x = [Effect, KeyOrder]']
  ])("allows %s its own imports: %s", async (file, code) => {
    expect(await violations(file, code)).toBe(0)
  })
})

const ruleHits = async (filePath: string, code: string, ruleId: string) => {
  const [result] = await eslint.lintText(code, { filePath })
  return result!.messages.filter((m) => m.ruleId === ruleId).length
}

// Core's layer order (packages/core/README.md) is enforced by eslint-plugin-boundaries.
describe("core layers", () => {
  it.each([
    ["packages/core/src/model/X.ts", "../controllers/Controller.js"],
    ["packages/core/src/scheduler/X.ts", "../controllers/Controller.js"],
    ["packages/core/src/controllers/X.ts", "../scheduler/Scheduler.js"],
    ["packages/core/src/api/X.ts", "../policy/RbacRules.js"],
    ["packages/core/src/store/X.ts", "../api/Registry.js"],
    ["packages/core/src/object/X.ts", "../informer/Informer.js"]
  ])("rejects %s importing %s", async (file, source) => {
    expect(await ruleHits(file, `import * as M from "${source}"\nexport const x = M\n`, "boundaries/dependencies")).toBe(1)
  })

  it.each([
    ["packages/core/src/controllers/X.ts", "../informer/Informer.js"],
    ["packages/core/src/scheduler/X.ts", "../object/Json.js"],
    ["packages/core/src/agent/X.ts", "../controllers/Controller.js"],
    ["packages/core/src/api/X.ts", "./Registry.js"],
    ["packages/core/src/testing/X.ts", "../agent/Agent.js"],
    ["packages/core/src/index.ts", "./agent/Agent.js"]
  ])("allows %s importing %s", async (file, source) => {
    expect(await ruleHits(file, `import * as M from "${source}"\nexport const x = M\n`, "boundaries/dependencies")).toBe(0)
  })
})

describe("size limits", () => {
  it("rejects a source file over 800 lines", async () => {
    const code = Array.from({ length: 801 }, (_, i) => `export const x${i} = ${i}`).join("\n")
    expect(await ruleHits("packages/core/src/store/X.ts", code, "max-lines")).toBe(1)
    expect(await ruleHits("packages/core/src/store/X.ts", code.split("\n").slice(0, 800).join("\n"), "max-lines")).toBe(0)
  })

  it("rejects a function over 200 lines", async () => {
    const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i}; void v${i}`).join("\n")
    expect(await ruleHits("packages/daemon/src/X.ts", `export const f = () => {\n${body(201)}\n}\n`, "max-lines-per-function")).toBe(1)
    expect(await ruleHits("packages/daemon/src/X.ts", `export const f = () => {\n${body(200)}\n}\n`, "max-lines-per-function")).toBe(0)
  })
})
