import java.io.*;
import java.lang.reflect.*;
import java.net.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

/**
 * Test driver: loads one paraphrase table with the jar's ParaphraseTransducer (its own class loader, the jar
 * only) and with vistkit's (the class path: helper directory first), and compares what Meteor reads of it:
 * translate(word) for every query word, getReferencePaths(ids, start) for every start of every query line, and
 * getParaphrase(entry) for every entry either returns. Usage: java -cp HELPER:JAR ParaphraseCheck JAR TABLE.gz [ENTRIES]
 * with query lines (whitespace-separated words) on stdin. Prints "load SOURCE" (how vistkit's got its table),
 * then "checked N" or the first difference, and exits 1 on a difference.
 */
public class ParaphraseCheck {
    public static void main(String[] args) throws Exception {
        URL jar = new File(args[0]).toURI().toURL();
        URL table = new File(args[1]).toURI().toURL();
        ClassLoader only = new URLClassLoader(new URL[] {jar}, null);
        Class<?> theirsClass = Class.forName("edu.cmu.meteor.aligner.ParaphraseTransducer", true, only);
        Class<?> oursClass = Class.forName("edu.cmu.meteor.aligner.ParaphraseTransducer");
        if (theirsClass == oursClass) throw new IllegalStateException("same class twice");
        Object theirs = theirsClass.getConstructor(URL.class).newInstance(table);
        Object ours = oursClass.getConstructor(URL.class).newInstance(table);
        System.out.println("load " + oursClass.getField("lastLoad").get(null));
        Method tt = theirsClass.getMethod("translate", String.class), ot = oursClass.getMethod("translate", String.class);
        Method tp = theirsClass.getMethod("getReferencePaths", int[].class, int.class);
        Method op = oursClass.getMethod("getReferencePaths", int[].class, int.class);
        Method tg = theirsClass.getMethod("getParaphrase", int.class), og = oursClass.getMethod("getParaphrase", int.class);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        long checked = 0;
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().isEmpty() ? new String[0] : line.trim().split("\\s+");
            int[] ids = new int[words.length];
            for (int i = 0; i < words.length; i++) {
                int a = (Integer) tt.invoke(theirs, words[i]), b = (Integer) ot.invoke(ours, words[i]);
                if (a != b) fail("translate(" + words[i] + "): jar " + a + ", vistkit " + b);
                ids[i] = a;
                checked++;
            }
            for (int s = 0; s < ids.length; s++) {
                int[] a = (int[]) tp.invoke(theirs, ids, s), b = (int[]) op.invoke(ours, ids, s);
                if (!Arrays.equals(a, b)) {
                    fail("paths at " + s + " of '" + line + "': jar " + Arrays.toString(a) + ", vistkit "
                        + Arrays.toString(b));
                }
                for (int k = 1; k < a.length; k += 2) {
                    int[] x = (int[]) tg.invoke(theirs, a[k]), y = (int[]) og.invoke(ours, a[k]);
                    if (!Arrays.equals(x, y)) fail("paraphrase " + a[k] + ": jar " + Arrays.toString(x)
                        + ", vistkit " + Arrays.toString(y));
                }
                checked += 1 + a.length / 2;
            }
        }
        int entries = args.length > 2 ? Integer.parseInt(args[2]) : 0;  // also every entry 0..entries-1
        for (int e = 0; e < entries; e++) {
            int[] x = (int[]) tg.invoke(theirs, e), y = (int[]) og.invoke(ours, e);
            if (!Arrays.equals(x, y)) fail("paraphrase " + e + ": jar " + Arrays.toString(x) + ", vistkit "
                + Arrays.toString(y));
            checked++;
        }
        System.out.println("checked " + checked);
    }

    static void fail(String what) {
        System.out.println("DIFF " + what);
        System.exit(1);
    }
}
