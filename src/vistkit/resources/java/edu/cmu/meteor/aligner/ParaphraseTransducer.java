package edu.cmu.meteor.aligner;

import java.io.*;
import java.net.URL;
import java.nio.*;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.security.MessageDigest;
import java.util.*;
import java.util.zip.CRC32;
import java.util.zip.GZIPInputStream;

/**
 * Meteor 1.5's paraphrase table (same name and public API as the jar's class, found first on vistkit's class
 * path), held in flat int arrays instead of one Hashtable per trie state, and cached on disk in that form.
 *
 * <p>What Meteor uses of the table (its ParaphraseMatcher, and vistkit's): {@code translate} (word -> id, -1
 * when unknown: only equality of ids matters), {@code getReferencePaths(ids, start)} (walk the trie of source
 * phrases along ids from start; at depth d+1 emit (d+1, entry) for every entry whose source phrase ends there, in
 * file order) and {@code getParaphrase(entry)} (the target phrase's ids). The file is read exactly as the jar
 * reads it (UTF-8 BufferedReader; per entry one line ignored (the probability, never used by Meteor), a source
 * line and a target line split by StringTokenizer; ids given in first-seen order), so every id, path, emit order
 * and target is the jar's: the matcher sees the same numbers. What is dropped is only what Meteor never reads
 * (the probabilities, the Hashtables).
 *
 * <p>Cache: when the system property {@code vistkit.paraphrase.cache} names a directory, the arrays are written
 * there once ({@code paraphrase-KEY.bin}, KEY = SHA-256 of the format, the table's path/size/mtime and the jar's
 * size/mtime, so a changed table or jar gives a new file) by the one process holding {@code KEY.lock} (others
 * read the gz meanwhile), to a temporary file then renamed atomically; later processes map the file read-only
 * (a few ms instead of seconds) after checking its header (magic, format, KEY) and the CRC-32 of its payload,
 * and rebuild it when any check fails. The header also records the SHA-256 of the gz it was built from.
 */
public class ParaphraseTransducer {
    static final byte[] MAGIC = "VKPARA01".getBytes(StandardCharsets.US_ASCII);
    static final int FORMAT = 1;
    static final int HEADER = 128;
    static final int SECTIONS = 10;

    /** How this table was obtained: "parsed", "built" (parsed and cache written) or "mapped". */
    public static volatile String lastLoad = "none";
    /** Where the cache file is (null when caching is off). */
    public static volatile String lastCacheFile = null;

    // word -> id: open addressing on String.hashCode, slot = id + 1 (0 = empty); words as UTF-16 chars
    private final IntBuffer wordStart;
    private final CharBuffer chars;
    private final IntBuffer slots;
    private final int mask;
    // the trie: state 0 = root; edges of a state sorted by word id; emits in file order
    private final IntBuffer transStart;
    private final IntBuffer transWord;
    private final IntBuffer transChild;
    private final IntBuffer emitStart;
    private final IntBuffer emitEntry;
    // the target phrase of every entry
    private final IntBuffer paraStart;
    private final IntBuffer paraWords;

    public ParaphraseTransducer(URL url) {
        Tables t = load(url);
        wordStart = t.ints[0];
        slots = t.ints[1];
        mask = slots.capacity() - 1;
        transStart = t.ints[2];
        transWord = t.ints[3];
        transChild = t.ints[4];
        emitStart = t.ints[5];
        emitEntry = t.ints[6];
        paraStart = t.ints[7];
        paraWords = t.ints[8];
        chars = t.chars;
    }

    // ------------------------------------------------------------------------------------------ public API
    public int translate(String word) {
        int h = mix(word.hashCode()) & mask;
        int n = word.length();
        while (true) {
            int slot = slots.get(h);
            if (slot == 0) return -1;
            int id = slot - 1;
            int lo = wordStart.get(id), hi = wordStart.get(id + 1);
            if (hi - lo == n) {
                int k = 0;
                while (k < n && chars.get(lo + k) == word.charAt(k)) k++;
                if (k == n) return id;
            }
            h = (h + 1) & mask;
        }
    }

    public int[] translate(String[] words) {
        int[] out = new int[words.length];
        for (int i = 0; i < words.length; i++) out[i] = translate(words[i]);
        return out;
    }

    public int[] translate(ArrayList<String> words) {
        int[] out = new int[words.size()];
        int i = 0;
        for (String w : words) out[i++] = translate(w);
        return out;
    }

    /** (length, entry) pairs of every source phrase starting at ids[start], shortest first, file order. */
    public int[] getReferencePaths(int[] ids, int start) {
        int[] out = new int[8];
        int n = 0;
        int state = 0;
        for (int d = 0; d < ids.length - start; d++) {
            state = child(state, ids[start + d]);
            if (state < 0) break;
            for (int e = emitStart.get(state), end = emitStart.get(state + 1); e < end; e++) {
                if (n + 2 > out.length) out = Arrays.copyOf(out, out.length * 2);
                out[n++] = d + 1;
                out[n++] = emitEntry.get(e);
            }
        }
        return Arrays.copyOf(out, n);
    }

    public int[] getParaphrase(int entry) {
        int lo = paraStart.get(entry), hi = paraStart.get(entry + 1);
        int[] out = new int[hi - lo];
        for (int k = lo; k < hi; k++) out[k - lo] = paraWords.get(k);
        return out;
    }

    private int child(int state, int word) {
        int lo = transStart.get(state), hi = transStart.get(state + 1) - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int w = transWord.get(mid);
            if (w < word) lo = mid + 1;
            else if (w > word) hi = mid - 1;
            else return transChild.get(mid);
        }
        return -1;
    }

    static int mix(int h) {
        h ^= h >>> 16;
        h *= 0x85ebca6b;
        h ^= h >>> 13;
        return h;
    }

    // ---------------------------------------------------------------------------------------------- loading
    static final class Tables {
        IntBuffer[] ints = new IntBuffer[SECTIONS - 1];
        CharBuffer chars;
    }

    static Tables load(URL url) {
        String dir = System.getProperty("vistkit.paraphrase.cache", "");
        File table = fileOf(url);
        if (dir.isEmpty() || table == null) {
            lastCacheFile = null;
            lastLoad = "parsed";
            return parse(url, null).tables();
        }
        try {
            byte[] key = key(table);
            Path base = Paths.get(dir);
            Files.createDirectories(base);
            Path file = base.resolve("paraphrase-" + hex(key).substring(0, 16) + ".bin");
            lastCacheFile = file.toString();
            Tables got = map(file, key);
            if (got != null) {
                lastLoad = "mapped";
                return got;
            }
            try (FileChannel lock = FileChannel.open(base.resolve("paraphrase-" + hex(key).substring(0, 16)
                    + ".lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                 FileLock held = lock.tryLock()) {
                if (held == null) {  // another process is building it: read the gz meanwhile
                    lastLoad = "parsed";
                    return parse(url, null).tables();
                }
                got = map(file, key);  // built while we waited for the lock
                if (got != null) {
                    lastLoad = "mapped";
                    return got;
                }
                MessageDigest sha = MessageDigest.getInstance("SHA-256");
                Parsed p = parse(url, sha);
                Tables t = p.tables();
                if (p.failed) {  // the jar would go on with what it read; so do we, but cache nothing
                    lastLoad = "parsed";
                    return t;
                }
                try {
                    write(t, file, key, sha.digest());
                    lastLoad = "built";
                } catch (IOException e) {  // read-only or full disk: serve what we parsed, cache nothing
                    lastLoad = "parsed";
                }
                return t;
            }
        } catch (Exception e) {  // no usable cache (read-only home, full disk...): the jar's way
            lastLoad = "parsed";
            return parse(url, null).tables();
        }
    }

    static File fileOf(URL url) {
        if (!"file".equals(url.getProtocol())) return null;
        try {
            File f = new File(url.toURI());
            return f.isFile() ? f : null;
        } catch (Exception e) {
            return null;
        }
    }

    static File jarFile() {
        try {
            URL loc = Aligner.class.getProtectionDomain().getCodeSource().getLocation();
            return new File(loc.toURI());
        } catch (Exception e) {
            return null;
        }
    }

    /** SHA-256 of what identifies the table: format, table path/size/mtime, the jar's size/mtime. */
    static byte[] key(File table) throws Exception {
        File jar = jarFile();
        String id = "vistkit-paraphrase|" + FORMAT + "|" + table.getCanonicalPath() + "|" + table.length() + "|"
            + table.lastModified() + "|" + (jar == null ? "" : jar.length() + "|" + jar.lastModified());
        return MessageDigest.getInstance("SHA-256").digest(id.getBytes(StandardCharsets.UTF_8));
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x & 0xff));
        return s.toString();
    }

    /** The cached tables, or null when the file is missing or fails a check (magic, format, key, CRC). */
    static Tables map(Path file, byte[] key) {
        if (!Files.isRegularFile(file)) return null;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < HEADER || size > Integer.MAX_VALUE) return null;
            ByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, size).order(ByteOrder.LITTLE_ENDIAN);
            byte[] magic = new byte[MAGIC.length];
            buf.get(magic);
            if (!Arrays.equals(magic, MAGIC) || buf.getInt() != FORMAT) return null;
            byte[] k = new byte[32];
            buf.get(k);
            if (!Arrays.equals(k, key)) return null;
            buf.position(buf.position() + 32);  // SHA-256 of the gz (provenance)
            long crc = buf.getLong();
            int[] len = new int[SECTIONS];
            for (int i = 0; i < SECTIONS; i++) len[i] = buf.getInt();
            long expect = HEADER;
            for (int i = 0; i < SECTIONS - 1; i++) expect += 4L * len[i];
            expect += 2L * len[SECTIONS - 1];
            if (expect != size) return null;
            ByteBuffer payload = buf.duplicate();
            payload.position(HEADER);
            CRC32 c = new CRC32();
            c.update(payload);
            if (c.getValue() != crc) return null;
            Tables t = new Tables();
            int at = HEADER;
            for (int i = 0; i < SECTIONS - 1; i++) {
                ByteBuffer part = buf.duplicate();
                part.position(at);
                part.limit(at + 4 * len[i]);
                t.ints[i] = part.slice().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
                at += 4 * len[i];
            }
            ByteBuffer part = buf.duplicate();
            part.position(at);
            t.chars = part.slice().order(ByteOrder.LITTLE_ENDIAN).asCharBuffer();
            return t;
        } catch (IOException e) {
            return null;
        }
    }

    static void write(Tables t, Path file, byte[] key, byte[] sourceSha) throws IOException {
        int[] len = new int[SECTIONS];
        for (int i = 0; i < SECTIONS - 1; i++) len[i] = t.ints[i].capacity();
        len[SECTIONS - 1] = t.chars.capacity();
        long total = HEADER;
        for (int i = 0; i < SECTIONS - 1; i++) total += 4L * len[i];
        total += 2L * len[SECTIONS - 1];
        if (total > Integer.MAX_VALUE) throw new IOException("paraphrase table too large to cache");
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp" + System.nanoTime());
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                CRC32 c = new CRC32();
                ByteBuffer chunk = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
                ch.position(HEADER);
                for (int i = 0; i < SECTIONS; i++) {
                    IntBuffer ints = i < SECTIONS - 1 ? t.ints[i].duplicate() : null;
                    CharBuffer cs = i < SECTIONS - 1 ? null : t.chars.duplicate();
                    if (ints != null) ints.rewind(); else cs.rewind();
                    while (ints != null ? ints.hasRemaining() : cs.hasRemaining()) {
                        chunk.clear();
                        if (ints != null) while (chunk.remaining() >= 4 && ints.hasRemaining()) chunk.putInt(ints.get());
                        else while (chunk.remaining() >= 2 && cs.hasRemaining()) chunk.putChar(cs.get());
                        chunk.flip();
                        c.update(chunk.duplicate());
                        while (chunk.hasRemaining()) ch.write(chunk);
                    }
                }
                ByteBuffer head = ByteBuffer.allocate(HEADER).order(ByteOrder.LITTLE_ENDIAN);
                head.put(MAGIC).putInt(FORMAT).put(key).put(sourceSha).putLong(c.getValue());
                for (int x : len) head.putInt(x);
                head.position(0);
                long at = 0;
                while (head.hasRemaining()) at += ch.write(head, at);
                ch.force(true);
            }
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    // ---------------------------------------------------------------------------------------------- parsing
    /** Growable int array. */
    static final class Ints {
        int[] a = new int[1024];
        int n;
        void add(int x) {
            if (n == a.length) a = Arrays.copyOf(a, a.length * 2);
            a[n++] = x;
        }
        int[] done() { return Arrays.copyOf(a, n); }
    }

    static final class Parsed {
        final HashMap<String, Integer> vocab = new HashMap<>();
        final ArrayList<String> words = new ArrayList<>();
        boolean failed;
        final Ints srcStart = new Ints(), srcWords = new Ints(), paraStart = new Ints(), paraWords = new Ints();

        Parsed() {
            srcStart.add(0);
            paraStart.add(0);
        }

        /** The jar's ParaphraseTransducer.map: ids in first-seen order. */
        int map(String w) {
            Integer id = vocab.get(w);
            if (id == null) {
                id = words.size();
                vocab.put(w, id);
                words.add(w);
            }
            return id;
        }

        Tables tables() {
            Tables t = new Tables();
            int v = words.size();
            // vocabulary
            int[] wordStart = new int[v + 1];
            int total = 0;
            for (int i = 0; i < v; i++) {
                wordStart[i] = total;
                total += words.get(i).length();
            }
            wordStart[v] = total;
            char[] cs = new char[total];
            for (int i = 0; i < v; i++) words.get(i).getChars(0, words.get(i).length(), cs, wordStart[i]);
            int size = 2;
            while (size < 2 * v + 2) size <<= 1;
            int[] slots = new int[size];
            for (int i = 0; i < v; i++) {
                int h = mix(words.get(i).hashCode()) & (size - 1);
                while (slots[h] != 0) h = (h + 1) & (size - 1);
                slots[h] = i + 1;
            }
            // the trie, from the entries sorted by source phrase (stable: file order among equal phrases)
            int[] ss = srcStart.done(), sw = srcWords.a;
            int entries = ss.length - 1;
            Integer[] order = new Integer[entries];
            for (int i = 0; i < entries; i++) order[i] = i;
            Arrays.sort(order, (x, y) -> {
                int a = ss[x], an = ss[x + 1] - a, b = ss[y], bn = ss[y + 1] - b;
                for (int k = 0; k < Math.min(an, bn); k++) {
                    int c = Integer.compare(sw[a + k], sw[b + k]);
                    if (c != 0) return c;
                }
                return Integer.compare(an, bn);
            });
            Ints edgeParent = new Ints(), edgeWord = new Ints(), edgeChild = new Ints(), emitState = new Ints();
            int[] path = new int[16];  // path[d] = state after d words of the previous phrase
            int prev = -1, states = 1;
            for (int r = 0; r < entries; r++) {
                int e = order[r];
                int a = ss[e], n = ss[e + 1] - a;
                int common = 0;
                if (prev >= 0) {
                    int b = ss[prev], bn = ss[prev + 1] - b;
                    while (common < Math.min(n, bn) && sw[a + common] == sw[b + common]) common++;
                }
                if (path.length < n + 1) path = Arrays.copyOf(path, 2 * (n + 1));
                path[0] = 0;
                for (int d = common; d < n; d++) {
                    int child = states++;
                    edgeParent.add(path[d]);
                    edgeWord.add(sw[a + d]);
                    edgeChild.add(child);
                    path[d + 1] = child;
                }
                emitState.add(path[n]);
                prev = e;
            }
            // edges grouped by parent (counting sort, stable: words ascending within a parent)
            int[] transStart = new int[states + 1];
            for (int i = 0; i < edgeParent.n; i++) transStart[edgeParent.a[i] + 1]++;
            for (int s = 0; s < states; s++) transStart[s + 1] += transStart[s];
            int[] fill = Arrays.copyOf(transStart, states);
            int[] transWord = new int[edgeParent.n], transChild = new int[edgeParent.n];
            for (int i = 0; i < edgeParent.n; i++) {
                int at = fill[edgeParent.a[i]]++;
                transWord[at] = edgeWord.a[i];
                transChild[at] = edgeChild.a[i];
            }
            // emits grouped by state (counting sort, stable: file order within a state)
            int[] emitStart = new int[states + 1];
            for (int r = 0; r < entries; r++) emitStart[emitState.a[r] + 1]++;
            for (int s = 0; s < states; s++) emitStart[s + 1] += emitStart[s];
            int[] efill = Arrays.copyOf(emitStart, states);
            int[] emitEntry = new int[entries];
            for (int r = 0; r < entries; r++) emitEntry[efill[emitState.a[r]]++] = order[r];
            IntBuffer[] ints = {
                IntBuffer.wrap(wordStart), IntBuffer.wrap(slots), IntBuffer.wrap(transStart),
                IntBuffer.wrap(transWord), IntBuffer.wrap(transChild), IntBuffer.wrap(emitStart),
                IntBuffer.wrap(emitEntry), IntBuffer.wrap(paraStart.done()), IntBuffer.wrap(paraWords.done()),
            };
            t.ints = ints;
            t.chars = CharBuffer.wrap(cs);
            return t;
        }
    }

    /** Reads the table exactly as the jar's constructor does (and feeds its bytes to sha when given). */
    static Parsed parse(URL url, MessageDigest sha) {
        Parsed p = new Parsed();
        try {
            InputStream raw = url.openStream();
            if (sha != null) raw = new java.security.DigestInputStream(raw, sha);
            BufferedReader in = new BufferedReader(new InputStreamReader(new GZIPInputStream(raw, 1 << 16),
                "UTF-8"), 1 << 16);
            try {
                while (in.readLine() != null) {
                    StringTokenizer src = new StringTokenizer(in.readLine());
                    while (src.hasMoreTokens()) p.srcWords.add(p.map(src.nextToken()));
                    StringTokenizer tgt = new StringTokenizer(in.readLine());
                    while (tgt.hasMoreTokens()) p.paraWords.add(p.map(tgt.nextToken()));
                    p.srcStart.add(p.srcWords.n);
                    p.paraStart.add(p.paraWords.n);
                }
                if (sha != null) {  // the digest covers the whole file, trailing bytes included
                    byte[] rest = new byte[1 << 16];
                    while (raw.read(rest) >= 0) { }
                }
            } finally {
                in.close();
            }
        } catch (FileNotFoundException e) {
            throw new RuntimeException("Error: file not found (" + url + ")");
        } catch (IOException e) {
            e.printStackTrace();
            p.failed = true;
        }
        return p;
    }
}
