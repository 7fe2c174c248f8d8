package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// TestSlurmRecipe runs README's Slurm recipe, as README writes it, under a
// real one-node Slurm (slurmctld, slurmd and munge from Debian's packages,
// which .ci/run installs): the simulator stands in for SGLang, one port per
// task. One task is cancelled mid-run and its index resubmitted alone, as
// README says; another is requeued while it runs. Every prompt is answered
// exactly once across the shards' files, each in its own shard's file, the
// cancelled gen had its interrupt (exec), and a login node's index sees the
// whole run done, shard by shard.
func TestSlurmRecipe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a Slurm cluster")
	}
	for _, cmd := range []string{"slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "munge", "unmunge"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Skipf("Slurm is not installed here (%s: %v); .ci/run installs slurm-wlm and munge", cmd, err)
		}
	}
	bin := gendexBinary(t)
	submit, resubmit, script := readmeSlurmRecipe(t)
	startMunge(t)
	dir := t.TempDir()
	env := startSlurm(t, dir)

	shared := filepath.Join(dir, "shared")
	const prompts = 200
	writeIDPrompts(t, filepath.Join(shared, "D"), "D", prompts)
	base := 20000 + os.Getpid()%5000 // a port per task, below the ephemeral range
	script = recipeHere(t, script, bin, shared, dir, base)
	if err := os.WriteFile(filepath.Join(dir, "gendex-shard.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := func(line string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	jobOf := func(out string) string {
		m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("sbatch said %q", out)
		}
		return m[1]
	}
	job := jobOf(sh(strings.Replace(submit, "N=16", "N=4", 1)))
	t.Cleanup(func() { exec.Command("scancel", job).Run() })
	raw := func(i int) string {
		return filepath.Join(shared, "D", store.Shard{I: i, N: 4}.FileName("raw_responses.jsonl"))
	}
	lines := func(path string) int {
		b, _ := os.ReadFile(path)
		return bytes.Count(b, []byte("\n"))
	}
	waitFor(t, 2*time.Minute, "task 1's first answers", func() bool { return lines(raw(1)) >= 10 })
	sh("scancel " + job + "_1")
	waitFor(t, 2*time.Minute, "task 2's first answers", func() bool { return lines(raw(2)) >= 10 })
	sh("scontrol requeue " + job + "_2")
	// A requeued task waits about two minutes (BeginTime) before it may
	// start again: start it now.
	waitFor(t, time.Minute, "task 2 pending again", func() bool {
		return strings.Contains(sh("squeue -h -o '%i %T' -j "+job), job+"_2 PENDING")
	})
	sh("scontrol update jobid=" + job + "_2 starttime=now")
	gone := func(j string) func() bool {
		return func() bool { return strings.TrimSpace(sh("squeue -h -j "+j)) == "" }
	}
	waitFor(t, 4*time.Minute, "the array to end", gone(job))
	if lines(raw(1)) >= countShard(t, shared, 1) {
		t.Fatalf("task 1 answered its whole shard before it was cancelled: the test needs slower tasks")
	}
	out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("slurm-%s_1.out", job)))
	if !strings.Contains(string(out), "gendex: interrupted") {
		t.Errorf("the cancelled task's gen never had its interrupt (exec gives it SIGTERM, not SIGKILL):\n%s", out)
	}
	again := jobOf(sh(strings.NewReplacer("--array=3", "--array=1", "SHARDS=16", "SHARDS=4").Replace(resubmit)))
	waitFor(t, 4*time.Minute, "the resubmitted task to end", gone(again))

	// Exactly once, each answer in its own shard's file.
	seen := map[string]int{}
	for i := range 4 {
		f, err := os.Open(raw(i))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l struct{ ID string }
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", raw(i), err)
			}
			seen[l.ID]++
			if s := store.ShardOf(l.ID, 4); s != i {
				t.Errorf("%s answered %s, of shard %d", raw(i), l.ID, s)
			}
		}
		f.Close()
	}
	missing := 0
	for i := 1; i <= prompts; i++ {
		if id := fmt.Sprintf("D-%05d", i); seen[id] != 1 {
			t.Errorf("%s: answered %d times", id, seen[id])
			missing++
		}
	}
	if missing > 0 {
		for i := range 4 {
			out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("slurm-%s_%d.out", job, i)))
			t.Logf("slurm-%s_%d.out:\n%s", job, i, tail(string(out), 3000))
			errs, _ := os.ReadFile(filepath.Join(shared, "D", store.Shard{I: i, N: 4}.FileName("errors.jsonl")))
			t.Logf("shard %d's errors:\n%s", i, errs)
		}
	}
	if len(seen) != prompts {
		t.Errorf("%d ids answered; want %d", len(seen), prompts)
	}
	login := filepath.Join(dir, "login.db")
	mustRunGendex(t, bin, "--db", login, "ingest", shared)
	code, progress, stderr := runGendex(t, bin, "", "--db", login, "query", "progress", "--format", "csv", "--no-header")
	if code != 0 || !strings.HasPrefix(progress, fmt.Sprintf("D,%d,%d,", prompts, prompts)) {
		t.Errorf("the login node's progress: %s (exit %d: %s); want %d prompts, %d answers", progress, code, stderr, prompts, prompts)
	}
	code, states, stderr := runGendex(t, bin, "", "--db", login, "query", "shards", "--format", "csv", "--no-header")
	if code != 0 || strings.Count(states, ",done,") != 4 {
		t.Errorf("the login node's shards: %s (exit %d: %s); want 4 shards done", states, code, stderr)
	}
}

// countShard is how many of the folder's prompts are of shard i of 4.
func countShard(t *testing.T, shared string, i int) int {
	b, err := os.ReadFile(filepath.Join(shared, "D", "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p struct{ ID string }
		json.Unmarshal([]byte(l), &p)
		if store.ShardOf(p.ID, 4) == i {
			n++
		}
	}
	return n
}

// readmeSlurmRecipe returns README's Slurm recipe: the submit line, the
// line that resubmits one index, and the batch script.
func readmeSlurmRecipe(t *testing.T) (submit, resubmit, script string) {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if m := regexp.MustCompile(`(?m)^    (N=16; sbatch .*)$`).FindStringSubmatch(s); m != nil {
		submit = m[1]
	}
	if m := regexp.MustCompile("`(sbatch --array=3\\s[^`]*)`").FindStringSubmatch(s); m != nil {
		resubmit = strings.Join(strings.Fields(m[1]), " ") // README may wrap it
	}
	if i := strings.Index(s, "    #!/bin/bash\n    # gendex-shard.sh"); i >= 0 {
		block := s[i:]
		block = block[:strings.Index(block, "\n\n")+1]
		script = strings.ReplaceAll(block, "\n    ", "\n")[4:]
	}
	if submit == "" || resubmit == "" || script == "" {
		t.Fatalf("README has no Slurm recipe the test knows (submit %q, resubmit %q, script %q)", submit, resubmit, script)
	}
	return submit, resubmit, script
}

// recipeHere makes README's batch script run here: the simulator for
// SGLang on a port of the task's own, no GPUs, the test's binary, folder
// and temp dir, short answers from a slow server (so that a task is still
// running when it is cancelled).
func recipeHere(t *testing.T, script, bin, shared, tmp string, base int) string {
	t.Helper()
	port := fmt.Sprintf("$((%d + SLURM_ARRAY_TASK_ID))", base)
	for _, r := range [][2]string{
		{"python -m sglang.launch_server --model-path /models/kimi --tp 8 \\\n    --port 30000 --enable-metrics &",
			bin + " sim --unmarked --seed 3 --decode-tps 40 --slots 4 --listen 127.0.0.1:" + port + " &"},
		{"http://127.0.0.1:30000", "http://127.0.0.1:" + port},
		{"exec gendex ", "exec " + bin + " "},
		{"--gres=gpu:8 ", ""},
		{"--db /tmp/", "--db " + tmp + "/"},
		{"--max-new-tokens 4096", "--max-new-tokens 16 --concurrency 4"},
		{"/shared/prepared", shared},
	} {
		if !strings.Contains(script, r[0]) {
			t.Fatalf("README's batch script has no %q:\n%s", r[0], script)
		}
		script = strings.ReplaceAll(script, r[0], r[1])
	}
	return script
}

// startMunge makes sure munged answers, starting it as Debian's package
// would when it does not.
func startMunge(t *testing.T) {
	t.Helper()
	works := func() bool { return exec.Command("bash", "-c", "munge -n | unmunge").Run() == nil }
	if works() {
		return
	}
	start := "mkdir -p /run/munge && chown munge:munge /run/munge && su -s /bin/sh munge -c /usr/sbin/munged"
	if out, err := exec.Command("bash", "-c", start).CombinedOutput(); err != nil {
		t.Fatalf("munged: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "munged to answer", works)
}

// startSlurm starts a one-node Slurm whose configuration, state and logs
// are in dir, on ports of its own, and returns the environment its
// commands need (SLURM_CONF). Both daemons end with the test.
func startSlurm(t *testing.T, dir string) []string {
	t.Helper()
	node, err := exec.Command("slurmd", "-C").Output()
	if err != nil {
		t.Fatalf("slurmd -C: %v", err)
	}
	nodeLine := strings.SplitN(strings.TrimSpace(string(node)), "\n", 2)[0] // NodeName=... CPUs=... RealMemory=...
	host := strings.TrimPrefix(strings.Fields(nodeLine)[0], "NodeName=")
	for _, d := range []string{"state", "spool", "log", "run"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	ctldPort, dPort := freePort(t), freePort(t)
	conf := fmt.Sprintf(`ClusterName=gendextest
SlurmctldHost=%[1]s
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=%[2]s/state
SlurmdSpoolDir=%[2]s/spool
SlurmctldPidFile=%[2]s/run/slurmctld.pid
SlurmdPidFile=%[2]s/run/slurmd.pid
SlurmctldLogFile=%[2]s/log/slurmctld.log
SlurmdLogFile=%[2]s/log/slurmd.log
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
KillWait=30
MinJobAge=300
MailProg=/bin/true
%[5]s State=UNKNOWN
PartitionName=debug Nodes=%[1]s Default=YES MaxTime=60 State=UP OverSubscribe=FORCE:4
`, host, dir, ctldPort, dPort, nodeLine)
	cgroup := "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n"
	confPath := filepath.Join(dir, "slurm.conf")
	os.WriteFile(confPath, []byte(conf), 0o644)
	os.WriteFile(filepath.Join(dir, "cgroup.conf"), []byte(cgroup), 0o644) // beside slurm.conf, where Slurm looks
	env := append(os.Environ(), "SLURM_CONF="+confPath)
	for _, daemon := range []string{"slurmctld", "slurmd"} {
		cmd := exec.Command(daemon, "-D", "-f", confPath)
		cmd.Env = env
		logf, _ := os.Create(filepath.Join(dir, "log", daemon+".out"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", daemon, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range []string{"slurmctld.log", "slurmd.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, "log", l))
				t.Logf("%s (end):\n%s", l, tail(string(b), 3000))
			}
		}
	})
	waitFor(t, time.Minute, "the node to be idle", func() bool {
		cmd := exec.Command("sinfo", "-h", "-o", "%T")
		cmd.Env = env
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return env
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// freePort is a TCP port no one listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	addr := freeAddr(t)
	var port int
	fmt.Sscanf(addr[strings.LastIndexByte(addr, ':')+1:], "%d", &port)
	return port
}
