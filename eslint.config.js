// Lint: typescript-eslint's recommended rules plus the package boundaries of DESIGN §2.
import js from "@eslint/js"
import globals from "globals"
import tseslint from "typescript-eslint"

// No package reaches into another package's sources or internals: it imports the sibling's
// public entry points (`@koder/fleet-core`, `@koder/fleet-core/testing`) only.
const crossPackage = {
  group: [
    "@koder/*/src",
    "@koder/*/src/**",
    "@koder/*/internal",
    "@koder/*/internal/**",
    "@koder/*/dist/**",
    "../../*/src/**",
    "../../../*/src/**",
    "../../../../*/src/**",
    // `*` also matches `..`: a test three folders deep reaching its own package's src is fine.
    "!../../src/**",
    "!../../../src/**",
    "!../../../../src/**"
  ],
  message: "Import a sibling package through its public entry point (package.json exports), never its src/ or internal/."
}

// Core is runtime-agnostic: it may run in any JavaScript host and embed in other services.
const coreForbidden = {
  group: ["node:*", "better-sqlite3", "pg", "pg-*", "@effect/platform-node", "@effect/platform-node/**", "undici"],
  message: "packages/core is runtime-agnostic (DESIGN §2): drivers and node:* modules belong in adapter packages."
}

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "**/.turbo/**", "**/coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: "module" },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-namespace": "off",
      "no-restricted-imports": ["error", { patterns: [crossPackage] }]
    }
  },
  {
    files: ["packages/core/src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [crossPackage, coreForbidden] }]
    }
  },
  {
    // Tests read arbitrary JSON responses; typing every body would only restate the assertions.
    files: ["packages/*/test/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" }
  },
  {
    files: ["**/*.mjs", "**/*.js"],
    languageOptions: { globals: globals.node }
  }
)
