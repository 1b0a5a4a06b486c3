// vistkit's METEOR helper (compiled by vistkit.models.java._helper_classpath into the user cache, with the classes in
// edu/cmu/meteor/aligner/, against pycocoevalcap's meteor-1.5.jar). Binary protocol on stdin/stdout: see the
// comment above HELPER_CLASS in src/vistkit/models/java.py.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import edu.cmu.meteor.aligner.Aligner;
import edu.cmu.meteor.aligner.Stemmer;
import edu.cmu.meteor.scorer.MeteorConfiguration;
import edu.cmu.meteor.scorer.MeteorScorer;
import edu.cmu.meteor.scorer.MeteorStats;
import edu.cmu.meteor.util.Constants;

/** vistkit's METEOR helper: one JVM, one scorer per configuration, batched and multithreaded. */
public class VistkitMeteor {
    static final List<MeteorScorer> scorers = new ArrayList<>();
    static final List<MeteorConfiguration> configs = new ArrayList<>();
    static int threads = 1;
    static ExecutorService pool;

    static final Map<String, MeteorScorer> shared = new HashMap<>();

    /**
     * A scorer for another task/normalisation of an already loaded language and module list, without
     * loading the paraphrase table again: the copy constructor shares the aligner's tables (its weights are
     * fixed at 1/0.5 by
     * MeteorScorer.loadConfiguration whatever the task), then we set the fields loadConfiguration would set.
     */
    static MeteorScorer reconfigure(MeteorScorer s, MeteorConfiguration c) throws Exception {
        java.lang.reflect.Method norm = MeteorScorer.class.getDeclaredMethod("setNormalize", int.class);
        norm.setAccessible(true);
        norm.invoke(s, c.getNormalization());
        ArrayList<Double> p = c.getParameters();
        String[] names = {"alpha", "beta", "gamma", "delta"};
        for (int i = 0; i < 4; i++) {
            java.lang.reflect.Field f = MeteorScorer.class.getDeclaredField(names[i]);
            f.setAccessible(true);
            f.setDouble(s, p.get(i));
        }
        java.lang.reflect.Field mw = MeteorScorer.class.getDeclaredField("moduleWeights");
        mw.setAccessible(true);
        mw.set(s, c.getModuleWeights());
        java.lang.reflect.Field cb = MeteorScorer.class.getDeclaredField("charBased");
        cb.setAccessible(true);
        cb.setBoolean(s, c.getCharBased());
        return s;
    }

    static void writeStr(DataOutputStream out, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(b.length);
        out.write(b);
    }

    static String readStr(DataInputStream in) throws IOException {
        int n = in.readInt();
        byte[] b = new byte[n];
        in.readFully(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    /** Snowball stems memoised per language (stem(w) depends on w only); misses go to Meteor's stemmer. */
    static final class CachingStemmer implements Stemmer {
        final Stemmer inner;
        final ConcurrentHashMap<String, String> cache;
        CachingStemmer(Stemmer inner, ConcurrentHashMap<String, String> cache) {
            this.inner = inner;
            this.cache = cache;
        }
        public String stem(String word) {
            String got = cache.get(word);
            if (got == null) {
                got = inner.stem(word);
                cache.putIfAbsent(word, got);
            }
            return got;
        }
    }

    static final ConcurrentHashMap<String, ConcurrentHashMap<String, String>> stemCaches =
        new ConcurrentHashMap<>();

    /** Wraps the scorer's aligner's stemmer (a private field, set once per aligner) in a CachingStemmer. */
    static void cacheStems(MeteorScorer s, String language) {
        try {
            java.lang.reflect.Field af = MeteorScorer.class.getDeclaredField("aligner");
            af.setAccessible(true);
            Aligner aligner = (Aligner) af.get(s);
            java.lang.reflect.Field sf = Aligner.class.getDeclaredField("stemmer");
            sf.setAccessible(true);
            Stemmer st = (Stemmer) sf.get(aligner);
            if (st == null || st instanceof CachingStemmer) return;
            sf.set(aligner, new CachingStemmer(st, stemCaches.computeIfAbsent(language,
                k -> new ConcurrentHashMap<>())));
        } catch (ReflectiveOperationException e) {
            // another Meteor build: keep its stemmer (same results, no cache)
        }
    }

    /** One scorer per worker thread; copies share the read-only tables (Meteor's copy constructor). */
    static MeteorScorer[] workers(int cfg) {
        MeteorScorer base = scorers.get(cfg);
        String language = configs.get(cfg).getLanguage();
        MeteorScorer[] w = new MeteorScorer[threads];
        w[0] = base;
        for (int i = 1; i < threads; i++) w[i] = new MeteorScorer(base);
        for (MeteorScorer x : w) cacheStems(x, language);
        return w;
    }

    static final Map<Integer, MeteorScorer[]> workerCache = new HashMap<>();

    interface Job { void run(MeteorScorer s, int i) throws Exception; }

    static void parallel(int cfg, int n, Job job) throws Exception {
        MeteorScorer[] w = workerCache.computeIfAbsent(cfg, VistkitMeteor::workers);
        if (threads == 1 || n < 64) {
            for (int i = 0; i < n; i++) job.run(w[0], i);
            return;
        }
        List<Future<?>> fs = new ArrayList<>();
        int chunk = (n + threads - 1) / threads;
        for (int t = 0; t < threads; t++) {
            final int lo = t * chunk, hi = Math.min(n, lo + chunk);
            final MeteorScorer s = w[t];
            fs.add(pool.submit(() -> { for (int i = lo; i < hi; i++) job.run(s, i); return null; }));
        }
        for (Future<?> f : fs) f.get();
    }

    /**
     * Exit as soon as the Python process that started us is gone (killed by SIGTERM or SIGKILL, it closes no
     * pipe we would notice while a batch runs): a daemon thread polls the parent's ProcessHandle (Java 9+, by
     * reflection so that the helper still compiles with --release 8; on Java 8 there is no watchdog).
     */
    static void exitWithParent() {
        try {
            Class<?> handle = Class.forName("java.lang.ProcessHandle");
            Object self = handle.getMethod("current").invoke(null);
            Object parent = ((Optional<?>) handle.getMethod("parent").invoke(self)).orElse(null);
            if (parent == null) return;
            java.lang.reflect.Method alive = handle.getMethod("isAlive");
            Thread watchdog = new Thread(() -> {
                try {
                    while ((Boolean) alive.invoke(parent)) Thread.sleep(1000);
                } catch (Exception e) {
                    return;
                }
                Runtime.getRuntime().halt(0);
            }, "vistkit-parent-watchdog");
            watchdog.setDaemon(true);
            watchdog.start();
        } catch (Exception e) {
            // Java 8: no ProcessHandle; the helper ends when it next reads or writes the closed pipes
        }
    }

    public static void main(String[] args) throws Exception {
        exitWithParent();
        threads = Math.max(1, Integer.parseInt(args.length > 0 ? args[0] : "1"));
        pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        // stdout carries the protocol: anything printed with System.out (a library's note) goes to stderr
        PrintStream protocol = System.out;
        System.setOut(System.err);
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(protocol, 1 << 16));
        while (true) {
            int op;
            try { op = in.readByte(); } catch (EOFException e) { break; }
            if (op == 'Q') break;
            if (op == 'V') {
                out.writeInt(0x56495354);  // hello ("VIST"): the caller knows a working JVM runs the helper
            } else if (op == 'C') {
                String task = readStr(in), lang = readStr(in), normName = readStr(in);
                // -norm = NORMALIZE_KEEP_PUNCT, -lower = NORMALIZE_LC_ONLY (from the jar's Constants)
                int norm = normName.equals("norm") ? Constants.NORMALIZE_KEEP_PUNCT
                    : normName.equals("lower") ? Constants.NORMALIZE_LC_ONLY
                    : normName.equals("nopunct") ? Constants.NORMALIZE_NO_PUNCT : Constants.NO_NORMALIZE;
                long t0 = System.nanoTime();
                // the order MeteorConfiguration asks for (as Meteor's -l/-t options): language, then task
                MeteorConfiguration config = new MeteorConfiguration();
                config.setLanguage(lang);
                if (!task.isEmpty()) config.setTask(task);
                config.setNormalization(norm);
                String key = config.getLanguage() + "|" + config.getModules() + "|" + config.getBeamSize()
                    + "|" + config.getParaDirURL() + "|" + config.getSynDirURL()
                    + "|" + config.getWordFileURL();
                MeteorScorer base = shared.get(key);
                MeteorScorer scorer;
                int loaded;
                if (base == null) {
                    scorer = new MeteorScorer(config);
                    shared.put(key, scorer);
                    loaded = 1;
                } else {
                    scorer = reconfigure(new MeteorScorer(base), config);
                    loaded = 0;
                }
                configs.add(config);
                scorers.add(scorer);
                out.writeInt(scorers.size() - 1);
                out.writeInt((int) ((System.nanoTime() - t0) / 1000000L));
                out.writeInt(loaded);
                writeStr(out, loaded == 1 ? edu.cmu.meteor.aligner.ParaphraseTransducer.lastLoad : "shared");
                ArrayList<Double> p = config.getParameters();
                for (int i = 0; i < 4; i++) out.writeDouble(p.get(i));
                ArrayList<Double> mw = config.getModuleWeights();
                out.writeInt(mw.size());
                for (double d : mw) out.writeDouble(d);
            } else if (op == 'P') {
                int cfg = in.readInt(), n = in.readInt();
                String[] test = new String[n], ref = new String[n];
                for (int i = 0; i < n; i++) { test[i] = readStr(in); ref[i] = readStr(in); }
                double[] score = new double[n];
                parallel(cfg, n, (s, i) -> score[i] = s.getMeteorStats(test[i], ref[i]).score);
                for (int i = 0; i < n; i++) out.writeDouble(score[i]);
            } else if (op == 'M') {
                int cfg = in.readInt(), n = in.readInt();
                String[] line = new String[n];
                for (int i = 0; i < n; i++) line[i] = readStr(in);
                String[] stats = new String[n];
                // SCORE: exactly Meteor.scoreStdio
                parallel(cfg, n, (s, i) -> {
                    String[] part = line[i].split("\\|\\|\\|");
                    ArrayList<String> refs = new ArrayList<>();
                    for (int j = 1; j < part.length - 1; j++) refs.add(part[j].trim());
                    String test = part.length > 1 ? part[part.length - 1].trim() : "";
                    stats[i] = s.getMeteorStats(test, refs).toString();
                });
                // EVAL: parse each stats text, score it, pool them
                MeteorScorer base = scorers.get(cfg);
                MeteorStats agg = new MeteorStats();
                for (int i = 0; i < n; i++) {
                    MeteorStats st = new MeteorStats(stats[i].trim());
                    base.computeMetrics(st);
                    String[] f = stats[i].trim().split("\\s+");
                    out.writeInt(f.length);
                    for (String x : f) out.writeDouble(Double.parseDouble(x));
                    out.writeDouble(st.score);
                    agg.addStats(st);
                }
                base.computeMetrics(agg);
                out.writeDouble(agg.score);
            } else {
                throw new IOException("unknown op " + op);
            }
            out.flush();
        }
        out.flush();
        pool.shutdownNow();
    }
}
