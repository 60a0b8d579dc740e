import { shared } from "../vitest.shared.js"
import { defineConfig, mergeConfig } from "vitest/config"

// Examples are tests so they cannot rot: each folder's *.test.ts runs with `npm test`.
export default mergeConfig(shared, defineConfig({ test: { include: ["**/*.test.ts"], exclude: ["node_modules/**"] } }))
