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
