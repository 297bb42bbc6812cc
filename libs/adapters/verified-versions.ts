/**
 * The versions of the agent CLIs the codex and claude_code adapters were verified against: their
 * protocols, files and error names are read as these versions write them (the comments that name
 * a version say where). scripts/install-agent-clis.sh installs exactly these for the tests
 * (test/integration/cli-doctor.test.ts holds the two equal); `baton doctor` warns about others.
 */
export const VERIFIED_CLI_VERSIONS = { codex: '0.171.0', claude_code: '2.1.197' } as const;
